//! What a device does in a Draw-and-Discard deployment, against a real server over HTTP: an
//! operator creates a model (declaring the clients' step, so the server checks every update as a
//! plausible step from the instance drawn); then 200 devices each draw an instance, take one
//! noisy local step on their own example (Laplace noise, ε = ln 32) and post it back with the
//! draw's ticket. The server here is `privfed-server` on a loopback port with a store in a
//! temporary directory; a real device would talk to `privfed serve`.
//!
//! Run: `cargo run -p privfed-client --example device`

use privfed_client::client::{Client, Submitted};
use privfed_ddml::client::{ClientNoise, ClientStep, PrivacyUnit};
use privfed_ddml::guard::{GuardSpec, UpdateGuard};
use privfed_ddml::wire::CreateModel;
use privfed_learn::glm::{Example, Glm};
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use std::sync::Arc;

const TOKEN: &str = "example-admin-token";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // --- the operator's side: a server with an embedded store on a free loopback port ---
    let dir = std::env::temp_dir().join(format!("privfed-client-example-{}", std::process::id()));
    let store = privfed_server::EmbeddedStore::create(&dir)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = Arc::new(privfed_server::AppState::new(store, TOKEN));
    let server = tokio::spawn(privfed_server::serve(listener, state, async {
        let _ = stopped.await;
    }));

    let glm = Glm::logistic(2)?;
    let (learning_rate, noise) = (
        0.05,
        ClientNoise::Laplace {
            epsilon: 32f64.ln(),
        },
    );
    let step = ClientStep::new(
        learning_rate,
        noise,
        PrivacyUnit::Feature,
        glm.num_weights(),
    )?;
    let admin = Client::new(&url)?.with_admin_token(TOKEN);
    admin
        .create_model(&CreateModel {
            name: "demo".into(),
            dim: glm.num_weights(),
            k: 5,
            init_std: None,
            spam_sigmas: None,
            spam_max_outside_fraction: None,
            update_guard: Some(UpdateGuard::Step(GuardSpec::new(learning_rate, noise))),
        })
        .await?;

    // --- the devices' side: draw, one local step on the device's own data, submit ---
    let device = Client::new(&url)?;
    let mut rng = seeded_rng_for_experiments(4);
    let mut accepted = 0;
    for i in 0..200 {
        let drawn = device.draw("demo").await?;
        let instance: Vec<f64> = drawn.weights.iter().map(|&w| f64::from(w)).collect();
        // The device's example: y = 1 when x₀ > x₁.
        let x = vec![(i % 10) as f64 / 10.0, ((i * 7) % 10) as f64 / 10.0];
        let y = f64::from(u8::from(x[0] > x[1]));
        let update = step.apply(&glm, &instance, &[Example::new(x, y)], &mut rng)?;
        let update: Vec<f32> = update.iter().map(|&w| w as f32).collect();
        match device
            .submit("demo", drawn.ticket.as_deref(), &update)
            .await?
        {
            Submitted::Accepted => accepted += 1,
            Submitted::Replayed => {}
            Submitted::Rejected(r) => println!("update {i} rejected: {}", r.message),
        }
    }
    let info = device.model("demo").await?;
    println!(
        "{accepted} of 200 updates accepted; the server counts {} accepted, {} rejected; \
         average model {:.3?}",
        info.updates_accepted, info.updates_rejected, info.mean
    );
    assert_eq!(accepted, 200);
    assert_eq!(info.updates_accepted, 200);

    admin.delete_model("demo").await?;
    let _ = stop.send(());
    server.await??;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
