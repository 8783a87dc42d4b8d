//! The router in-process (`tower::ServiceExt::oneshot`) with the real embedded store: every
//! route and every error code.

use crate::common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use privfed_server::{AppState, EmbeddedStore, router};
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

const TOKEN: &str = "s3cret-token";

struct App {
    router: axum::Router,
    _dir: common::TempDir,
}

fn app() -> App {
    let dir = common::TempDir::new("api");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    let mut state = AppState::new(store, TOKEN);
    state.bench_routes = true;
    App {
        router: router(Arc::new(state)),
        _dir: dir,
    }
}

async fn call(app: &App, req: Request<Body>) -> (StatusCode, Vec<u8>, String) {
    let resp = app.router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body, ct)
}

async fn call_json(app: &App, req: Request<Body>) -> (StatusCode, Value) {
    let (s, b, ct) = call(app, req).await;
    assert!(ct.starts_with("application/json"), "{s}: content-type {ct}");
    (s, serde_json::from_slice(&b).unwrap())
}

/// A creation request; objects without `update_guard` get `"off"` (these tests post arbitrary
/// vectors), so each malformed body below is refused for its own fault.
fn create_req(mut body: Value, token: Option<&str>) -> Request<Body> {
    if let Some(o) = body.as_object_mut() {
        o.entry("update_guard").or_insert(json!("off"));
    }
    let mut r = Request::post("/v1/models").header("content-type", "application/json");
    if let Some(t) = token {
        r = r.header("authorization", format!("Bearer {t}"));
    }
    r.body(Body::from(body.to_string())).unwrap()
}

fn json_update(name: &str, w: &Value) -> Request<Body> {
    Request::post(format!("/v1/models/{name}/updates"))
        .header("content-type", "application/json")
        .body(Body::from(json!({ "weights": w }).to_string()))
        .unwrap()
}

fn bin_update(name: &str, w: &[f32]) -> Request<Body> {
    Request::post(format!("/v1/models/{name}/updates"))
        .header("content-type", "application/octet-stream")
        .body(Body::from(privfed_server::ddml::model::encode_f32(w)))
        .unwrap()
}

async fn model(app: &App, name: &str) -> Value {
    let (s, v) = call_json(
        app,
        Request::get(format!("/v1/models/{name}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    v
}

#[tokio::test]
async fn model_management_needs_the_admin_token() {
    let app = app();
    let spec = json!({"name": "m", "dim": 3, "k": 4});
    let (s, v) = call_json(&app, create_req(spec.clone(), None)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(v["error"], "unauthorized");
    let (s, v) = call_json(&app, create_req(spec.clone(), Some("wrong"))).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(v["error"], "forbidden");
    let (s, _) = call_json(&app, create_req(spec.clone(), Some(&TOKEN[..5]))).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, v) = call_json(&app, create_req(spec.clone(), Some(TOKEN))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["k"], 4);
    let (s, v) = call_json(&app, create_req(spec, Some(TOKEN))).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(v["error"], "conflict");

    let del = |t: Option<&str>| {
        let mut r = Request::delete("/v1/models/m");
        if let Some(t) = t {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        r.body(Body::empty()).unwrap()
    };
    assert_eq!(call(&app, del(None)).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(call(&app, del(Some("nope"))).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(&app, del(Some(TOKEN))).await.0, StatusCode::NO_CONTENT);
    let (s, v) = call_json(&app, del(Some(TOKEN))).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(v["error"], "not_found");
    // Gone for clients too.
    let (s, _) = call_json(
        &app,
        Request::get("/v1/models/m/draw")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn invalid_model_parameters_are_400() {
    let app = app();
    for bad in [
        json!({"name": "", "dim": 3, "k": 2}),
        json!({"name": "a b", "dim": 3, "k": 2}),
        json!({"name": "x".repeat(65), "dim": 3, "k": 2}),
        json!({"name": "m", "dim": 0, "k": 2}),
        json!({"name": "m", "dim": 3, "k": 0}),
        json!({"name": "m", "dim": 3, "k": 1001}),
        json!({"name": "m", "dim": 100000, "k": 1000}),
        json!({"name": "m", "dim": 3, "k": 2, "init_std": -1.0}),
        json!({"name": "m", "dim": 3, "k": 2, "spam_sigmas": 3.0}),
        json!({"name": "m", "dim": 3, "k": 1, "init_std": 1.0, "spam_sigmas": 3.0}),
        json!({"name": "m", "dim": 3, "k": 2, "init_std": 1.0, "spam_sigmas": -3.0}),
        json!({"name": "m", "dim": 3, "k": 2, "spam_max_outside_fraction": 0.1}),
        json!({"name": "m", "dim": 3, "k": 2, "bogus": 1}),
        json!({"name": "m", "dim": -3, "k": 2}),
        json!({"name": "m", "k": 2}),
    ] {
        let (s, v) = call_json(&app, create_req(bad.clone(), Some(TOKEN))).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad} -> {v}");
        assert_eq!(v["error"], "bad_request");
    }
    let r = Request::post("/v1/models")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(Body::from("{not json"))
        .unwrap();
    assert_eq!(call_json(&app, r).await.0, StatusCode::BAD_REQUEST);
    let r = Request::post("/v1/models")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "text/plain")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(
        call_json(&app, r).await.0,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    let r = Request::post("/v1/models")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(Body::from(vec![b' '; 70_000]))
        .unwrap();
    assert_eq!(call_json(&app, r).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn draw_update_and_model_view() {
    let app = app();
    let (s, _) = call_json(
        &app,
        create_req(
            json!({"name": "m", "dim": 4, "k": 3, "init_std": 0.5}),
            Some(TOKEN),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, v) = call_json(
        &app,
        Request::get("/v1/models/m/draw")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["weights"].as_array().unwrap().len(), 4);
    let (s, b, ct) = call(
        &app,
        Request::get("/v1/models/m/draw")
            .header("accept", "application/octet-stream")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, b.len(), ct.as_str()),
        (StatusCode::OK, 16, "application/octet-stream")
    );

    let v0 = model(&app, "m").await;
    assert_eq!(v0["updates_accepted"], 0);
    assert_eq!(v0["mean"].as_array().unwrap().len(), 4);
    assert!(v0["intra_model_variance"].as_f64().unwrap() > 0.0);

    let (s, v) = call_json(&app, json_update("m", &json!([1.0, 2.0, 3.0, 4.0]))).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let (s, _) = call_json(&app, bin_update("m", &[1.0, 2.0, 3.0, 4.0])).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    // Overwrite all instances with the same vector (many times so every instance is hit):
    // the mean is then exact and the variance 0.
    for _ in 0..200 {
        assert_eq!(
            call(&app, bin_update("m", &[1.0, 2.0, 3.0, 4.0])).await.0,
            StatusCode::ACCEPTED
        );
    }
    let v1 = model(&app, "m").await;
    assert_eq!(v1["updates_accepted"], 202);
    assert_eq!(v1["updates_rejected"], 0);
    assert_eq!(v1["mean"], json!([1.0, 2.0, 3.0, 4.0]));
    assert_eq!(v1["intra_model_variance"], 0.0);
    assert_eq!(v1["name"], "m");
    assert_eq!(v1["dim"], 4);
    assert_eq!(v1["k"], 3);
}

#[tokio::test]
async fn bad_updates_are_4xx_and_change_nothing() {
    let app = app();
    call_json(
        &app,
        create_req(
            json!({"name": "m", "dim": 4, "k": 3, "init_std": 0.5}),
            Some(TOKEN),
        ),
    )
    .await;
    let before = model(&app, "m").await;
    let cases: Vec<(Request<Body>, StatusCode, &str)> = vec![
        (
            json_update("m", &json!([1.0, 2.0, 3.0])),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json_update("m", &json!([1.0, 2.0, 3.0, 4.0, 5.0])),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json_update("m", &json!([1.0, 2.0, 3.0, 1e39])),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json_update("m", &json!([1.0, "x", 3.0, 1.0])),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json_update("m", &json!([])),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            bin_update("m", &[1.0, 2.0, f32::NAN, 4.0]),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            bin_update("m", &[1.0, 2.0, f32::INFINITY, 4.0]),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            bin_update("m", &[1.0, 2.0, 3.0]),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Request::post("/v1/models/m/updates")
                .header("content-type", "application/octet-stream")
                .body(Body::from(vec![0u8; 15]))
                .unwrap(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Request::post("/v1/models/m/updates")
                .header("content-type", "application/json")
                .body(Body::from("{\"weights\": [1,2,3,4"))
                .unwrap(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Request::post("/v1/models/m/updates")
                .header("content-type", "application/json")
                .body(Body::from("1e999"))
                .unwrap(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Request::post("/v1/models/m/updates")
                .header("content-type", "text/csv")
                .body(Body::from("1,2,3,4"))
                .unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        (
            Request::post("/v1/models/m/updates")
                .header("content-type", "application/json")
                .body(Body::from(vec![b' '; 64 + 32 * 4 + 1]))
                .unwrap(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        (
            Request::post("/v1/models/m/updates")
                .header("content-type", "application/octet-stream")
                .body(Body::from(vec![0u8; 4 * 4 + 1025]))
                .unwrap(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        (
            json_update("nope", &json!([1.0])),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            json_update("bad%20name", &json!([1.0])),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
    ];
    for (i, (req, status, code)) in cases.into_iter().enumerate() {
        let (s, v) = call_json(&app, req).await;
        assert_eq!(s, status, "case {i}: {v}");
        assert_eq!(v["error"], code, "case {i}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // A streamed body without Content-Length over the limit is also 413.
    let stream = futures_like_stream(vec![vec![b' '; 100]; 10]);
    let req = Request::post("/v1/models/m/updates")
        .header("content-type", "application/json")
        .body(stream)
        .unwrap();
    assert_eq!(call_json(&app, req).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    let after = model(&app, "m").await;
    assert_eq!(before, after, "a rejected request changed the model");
}

/// A body of several frames and no Content-Length.
fn futures_like_stream(chunks: Vec<Vec<u8>>) -> Body {
    use http_body_util::StreamBody;
    let frames = chunks
        .into_iter()
        .map(|c| Ok::<_, std::io::Error>(hyper_frame(c)));
    Body::new(StreamBody::new(tokio_stream_iter(frames)))
}

fn hyper_frame(c: Vec<u8>) -> http_body::Frame<axum::body::Bytes> {
    http_body::Frame::data(axum::body::Bytes::from(c))
}

/// A minimal `Stream` over an iterator (avoids a futures dependency).
fn tokio_stream_iter<I: Iterator + Unpin>(it: I) -> IterStream<I> {
    IterStream(it)
}

struct IterStream<I>(I);

impl<I: Iterator + Unpin> futures_core::Stream for IterStream<I> {
    type Item = I::Item;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.next())
    }
}

#[tokio::test]
async fn spam_filter_rejects_with_422_and_counts() {
    let app = app();
    call_json(
        &app,
        create_req(
            json!({"name": "s", "dim": 4, "k": 10, "init_std": 1.0, "spam_sigmas": 4.0}),
            Some(TOKEN),
        ),
    )
    .await;
    let mean: Vec<f64> = model(&app, "s").await["mean"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // The mean itself is inside the band.
    let (s, _) = call_json(&app, json_update("s", &json!(mean))).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let before = model(&app, "s").await;
    let mut bad = mean.clone();
    bad[2] += 1000.0;
    let (s, v) = call_json(&app, json_update("s", &json!(bad))).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"], "rejected_by_spam_filter");
    assert!(v["message"].as_str().unwrap().contains("outside"));
    assert_eq!(v["rejection"]["worst_index"], 2);
    let after = model(&app, "s").await;
    assert_eq!(after["updates_rejected"], 1);
    assert_eq!(after["updates_accepted"], 1);
    assert_eq!(after["mean"], before["mean"]);
}

#[tokio::test]
async fn health_metrics_openapi_and_fallbacks() {
    let app = app();
    let (s, v) = call_json(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("ok")));
    call_json(
        &app,
        create_req(json!({"name": "m", "dim": 2, "k": 2}), Some(TOKEN)),
    )
    .await;
    call(&app, bin_update("m", &[1.0, 1.0])).await;
    call(&app, bin_update("m", &[1.0])).await;
    let (s, b, ct) = call(&app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(ct.starts_with("text/plain"));
    let text = String::from_utf8(b).unwrap();
    assert!(
        text.contains(
            "privfed_http_requests_total{route=\"/v1/models/{name}/updates\",code=\"202\"} 1"
        ),
        "{text}"
    );
    assert!(text.contains(
        "privfed_http_requests_total{route=\"/v1/models/{name}/updates\",code=\"400\"} 1"
    ));
    assert!(text.contains("privfed_updates_accepted_total 1"));
    assert!(text.contains("privfed_updates_rejected_total 0"));
    assert!(text.contains(
        "privfed_http_request_duration_seconds_count{route=\"/v1/models/{name}/updates\"} 2"
    ));
    assert!(text.contains("le=\"+Inf\""));

    let (s, doc) = call_json(
        &app,
        Request::get("/openapi.json").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    for p in [
        "/v1/models",
        "/v1/models/{name}",
        "/v1/models/{name}/draw",
        "/v1/models/{name}/updates",
        "/healthz",
        "/metrics",
        "/openapi.json",
        "/v1/secagg/rounds",
        "/v1/secagg/rounds/{id}",
        "/v1/secagg/rounds/{id}/join",
        "/v1/secagg/rounds/{id}/messages",
        "/v1/secagg/rounds/{id}/next",
        "/v1/secagg/rounds/{id}/close",
        "/v1/secagg/rounds/{id}/result",
    ] {
        assert!(
            doc["paths"].get(p).is_some(),
            "{p} missing from openapi.json"
        );
    }
    let (s, v) = call_json(&app, Request::get("/nope").body(Body::empty()).unwrap()).await;
    assert_eq!(
        (s, v["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let (s, v) = call_json(&app, Request::put("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(v["error"], "method_not_allowed");
}

#[tokio::test]
async fn bench_ceiling_routes() {
    let app = app();
    let (s, b, _) = call(
        &app,
        Request::get("/bench/5")
            .header("accept", "application/octet-stream")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!((s, b.len()), (StatusCode::OK, 20));
    let req = Request::post("/bench/2")
        .header("content-type", "application/octet-stream")
        .body(Body::from(privfed_server::ddml::model::encode_f32(&[
            1.0, 2.0,
        ])))
        .unwrap();
    assert_eq!(call(&app, req).await.0, StatusCode::ACCEPTED);
    let req = Request::post("/bench/3")
        .header("content-type", "application/octet-stream")
        .body(Body::from(privfed_server::ddml::model::encode_f32(&[
            1.0, 2.0,
        ])))
        .unwrap();
    assert_eq!(call(&app, req).await.0, StatusCode::BAD_REQUEST);
}

/// The server draws uniformly: k = 5 distinct instances (init_std = 1), 5000 draws through the
/// router; chi-square goodness of fit against uniform at α = 1e-6 (`privfed_testkit`).
#[tokio::test]
async fn draws_are_uniform_over_instances() {
    let app = app();
    call_json(
        &app,
        create_req(
            json!({"name": "u", "dim": 2, "k": 5, "init_std": 1.0}),
            Some(TOKEN),
        ),
    )
    .await;
    let mut counts: std::collections::HashMap<Vec<u8>, u64> = Default::default();
    let n = 5000u64;
    for _ in 0..n {
        let (s, b, _) = call(
            &app,
            Request::get("/v1/models/u/draw")
                .header("accept", "application/octet-stream")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        *counts.entry(b).or_default() += 1;
    }
    assert_eq!(counts.len(), 5, "expected 5 distinct instances");
    let c: Vec<u64> = counts.into_values().collect();
    privfed_testkit::assert_chi_square_gof(&c, &[0.2; 5], 1e-6, "draws over instances");
}

/// Extractor failures are JSON errors too (not axum's plain-text rejections).
#[tokio::test]
async fn path_errors_are_json() {
    let app = app();
    let (s, v) = call_json(
        &app,
        Request::get("/v1/models/%FF%FE/draw")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"], "bad_request");
    let (s, v) = call_json(
        &app,
        Request::get("/bench/abc").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    let (s, _) = call_json(&app, Request::get("/bench/0").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, v) = call_json(
        &app,
        Request::post("/v1/models/m/draw")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error"].as_str()),
        (StatusCode::METHOD_NOT_ALLOWED, Some("method_not_allowed"))
    );
}

/// The guard is on by default — a creation must declare the clients' step or say
/// `"off"`; a declared guard needs the draw's ticket, refuses a post that is not a plausible step
/// from the instance drawn (422 `rejected_by_guard`, counted), and accepts an honest one.
#[tokio::test]
async fn the_update_guard_is_on_by_default() {
    let app = app();
    let bare = Request::post("/v1/models")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::from(
            json!({"name": "g", "dim": 3, "k": 2}).to_string(),
        ))
        .unwrap();
    let (s, v) = call_json(&app, bare).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("update_guard"),
        "{v}"
    );
    let guard = json!({"learning_rate": 0.01, "noise": {"kind": "none"}});
    for bad in [
        json!({"learning_rate": -1.0, "noise": {"kind": "none"}}),
        json!({"learning_rate": 0.01, "noise": {"kind": "none"}, "max_abs_weight": 1.0}),
        json!({"learning_rate": 0.01}),
    ] {
        let (s, v) = call_json(
            &app,
            create_req(
                json!({"name": "g", "dim": 3, "k": 2, "init_std": 0.5, "update_guard": bad}),
                Some(TOKEN),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    let (s, v) = call_json(
        &app,
        create_req(
            json!({"name": "g", "dim": 3, "k": 2, "init_std": 0.5, "update_guard": guard}),
            Some(TOKEN),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["update_guard"]["learning_rate"], 0.01);

    // Without a ticket: 428.
    let (s, v) = call_json(&app, bin_update("g", &[0.0; 3])).await;
    assert_eq!(s, StatusCode::PRECONDITION_REQUIRED, "{v}");
    assert_eq!(v["error"], "ticket_required");

    let draw = || {
        Request::get("/v1/models/g/draw")
            .header("accept", "application/octet-stream")
            .body(Body::empty())
            .unwrap()
    };
    let with_ticket = |w: &[f32], t: &str| {
        Request::post("/v1/models/g/updates")
            .header("content-type", "application/octet-stream")
            .header("privfed-ticket", t)
            .body(Body::from(privfed_server::ddml::model::encode_f32(w)))
            .unwrap()
    };
    // A step of exactly γ per weight (no noise declared) passes; 1.5γ does not.
    let (w, t) = drawn(&app, draw()).await;
    let ok: Vec<f32> = w.iter().map(|x| x - 0.01).collect();
    let (s, v) = call(&app, with_ticket(&ok, &t)).await.into_status_json();
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let (w, t) = drawn(&app, draw()).await;
    let far: Vec<f32> = w.iter().map(|x| x + 0.015).collect();
    let (s, v) = call(&app, with_ticket(&far, &t)).await.into_status_json();
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"], "rejected_by_guard");
    assert_eq!(v["rejection"]["test"], "coordinate");
    // The poison of item 4 (one f32::MAX post) is refused by the absolute bound.
    let (w, t) = drawn(&app, draw()).await;
    let mut poison = w.clone();
    poison[1] = f32::MAX;
    let (s, v) = call(&app, with_ticket(&poison, &t))
        .await
        .into_status_json();
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["rejection"]["test"], "max_abs_weight");
    let m = model(&app, "g").await;
    assert_eq!(
        (
            m["updates_accepted"].as_u64(),
            m["updates_rejected"].as_u64()
        ),
        (Some(1), Some(2))
    );
}

trait IntoStatusJson {
    fn into_status_json(self) -> (StatusCode, Value);
}

impl IntoStatusJson for (StatusCode, Vec<u8>, String) {
    fn into_status_json(self) -> (StatusCode, Value) {
        (
            self.0,
            serde_json::from_slice(&self.1).unwrap_or(Value::Null),
        )
    }
}

/// Draws through the router: the instance and its ticket.
async fn drawn(app: &App, req: Request<Body>) -> (Vec<f32>, String) {
    let resp = app.router.clone().oneshot(req).await.unwrap();
    let t = resp.headers()["privfed-ticket"]
        .to_str()
        .unwrap()
        .to_string();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (privfed_server::ddml::model::decode_f32(&b).unwrap(), t)
}
