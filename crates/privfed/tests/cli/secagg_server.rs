//! Secure aggregation against the real `privfed serve` binary: `privfed secagg simulate
//! --server`, and a round that survives `kill -9` of the server mid-stage.

use crate::common::{TempDir, fails_with, json_ok};
use crate::serve_ops::Served;
use privfed_client::secagg::{Outcome, SecAggClient};
use privfed_secagg::Stage;
use privfed_secagg::local::plain_sum;
use std::time::Duration;

#[test]
fn secagg_simulate_against_privfed_serve_and_over_loopback() {
    let dir = TempDir::new("secagg-serve");
    let served = Served::start(&dir.0, &[]);
    let url = format!("http://{}", served.addr);
    let v = json_ok(&[
        "secagg",
        "simulate",
        "--clients",
        "16",
        "--dim",
        "500",
        "--bits",
        "24",
        "--dropout",
        "0.25",
        "--seed",
        "4",
        "--server",
        &url,
        "--admin-token",
        "t",
        "--json",
        "--quiet",
    ]);
    assert_eq!(v["exact"], true, "{v}");
    assert_eq!(v["survivors"], 12);
    assert_eq!(v["recovered_dropouts"], 4);
    assert_eq!(v["transport"], url.as_str());
    // A wrong admin token cannot create a round.
    fails_with(
        &[
            "secagg",
            "simulate",
            "--clients",
            "4",
            "--dim",
            "5",
            "--server",
            &url,
            "--admin-token",
            "wrong",
            "--quiet",
        ],
        "403",
    );
    // --http: the same over a loopback server started in-process.
    let v = json_ok(&[
        "secagg",
        "simulate",
        "--clients",
        "10",
        "--dim",
        "100",
        "--dropout",
        "0.2",
        "--dropout-stage",
        "random",
        "--seed",
        "2",
        "--http",
        "--json",
        "--quiet",
    ]);
    assert_eq!(v["exact"], true, "{v}");
    assert!(
        v["transport"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
}

/// `kill -9` of `privfed serve` during the masked-input stage (nine of ten inputs stored, the
/// tenth client gone): restarted on the same port and data directory, it resumes the round from
/// its store; the clients retry through the outage and the sum is exact.
#[test]
fn a_round_survives_kill_9_of_the_server_mid_stage() {
    let dir = TempDir::new("secagg-kill9");
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap().to_string();
    drop(probe);
    let mut served = Served::start_on(&dir.0, &addr, &[]);
    let url = format!("http://{addr}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = SecAggClient::new(&url)
            .unwrap()
            .with_retry_budget(Duration::from_secs(60));
        let (n, dim, bits) = (10usize, 4000usize, 30u32);
        let created = http
            .create_round(
                "t",
                &serde_json::json!({"clients": n, "bits": bits, "dim": dim, "stage_timeout_ms": 120000}),
            )
            .await
            .unwrap();
        let m = privfed_secagg::mask::modulus_mask(bits);
        let xs: Vec<Vec<u64>> = (0..n)
            .map(|i| (0..dim).map(|j| ((i * 7919 + j * 104_729) as u64) & m).collect())
            .collect();
        let mut tasks = Vec::new();
        for (i, x) in xs.iter().cloned().enumerate() {
            let joined = http.join(&created.round).await.unwrap();
            let http = http.clone();
            let drop = (i == n - 1).then_some(Stage::MaskedInput);
            tasks.push(tokio::spawn(async move { http.participate(&joined, &x, drop).await }));
        }
        loop {
            let v = http.status(&created.round).await.unwrap();
            if v["stage"] == "masked_input" && v["pending"] == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // SIGKILL: no shutdown, no flush beyond what was committed.
        served.child.kill().unwrap();
        served.child.wait().unwrap();
        let _restarted = Served::start_on(&dir.0, &addr, &[]);
        let v = http.status(&created.round).await.unwrap();
        assert_eq!(v["stage"], "masked_input", "{v}");
        assert_eq!(v["pending"], 1, "{v}");
        http.close_stage("t", &created.round).await.unwrap();
        for t in tasks {
            let p = t.await.unwrap().unwrap();
            assert!(
                matches!(p.outcome, Outcome::Finished | Outcome::Dropped(Stage::MaskedInput)),
                "{p:?}"
            );
        }
        let out = http.result("t", &created.round).await.unwrap();
        assert_eq!(out.survivors, (1..=9).collect::<Vec<u32>>());
        assert_eq!(out.dropped, vec![10]);
        assert_eq!(out.sum, plain_sum(&xs, &out.survivors, bits));
    });
}
