//! The OpenAPI 3.1 description served at `GET /openapi.json` (written by hand; the tests check
//! that every route of the router appears in it).

use serde_json::{Value, json};

fn err(desc: &str) -> Value {
    json!({"description": desc, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

/// The document.
pub fn document() -> Value {
    let weights = json!({"type": "object", "required": ["weights"],
        "properties": {"weights": {"type": "array", "items": {"type": "number"}}}});
    json!({
      "openapi": "3.1.0",
      "info": {"title": "privfed Draw-and-Discard server", "version": env!("CARGO_PKG_VERSION"),
               "description": "Paper 003 (Draw and Discard): k instances per model; clients draw a uniformly random instance, take a noisy local step, and post the result, which overwrites a uniformly random instance. Weights are stored as f32."},
      "components": {
        "securitySchemes": {"admin": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer TOKEN (scheme case-insensitive)"}},
        "schemas": {
          "Error": {"type": "object", "required": ["error", "message"],
                    "properties": {"error": {"type": "string"}, "message": {"type": "string"},
                                   "reason": {"type": "string", "description": "why a ticket (409) or an update (422) was refused: ticket_unknown, ticket_expired, ticket_for_another_model, instance_overwritten, ticket_in_progress; spam_filter, guard_max_abs_weight, guard_coordinate, guard_norm"}}},
          "Weights": weights,
          "GuardSpec": {"type": "object", "required": ["learning_rate", "noise"], "properties": {
              "learning_rate": {"type": "number", "exclusiveMinimum": 0},
              "noise": {"type": "object", "required": ["kind"], "description": "{\"kind\": \"laplace\", \"epsilon\"} | {\"kind\": \"gaussian\", \"epsilon\", \"delta\"} | {\"kind\": \"none\"}"},
              "unit": {"enum": ["feature", "model"]},
              "max_abs_weight": {"type": "number", "description": "default 1e6; at least 10·init_std"},
              "false_rejection": {"type": "number", "description": "honest rejection probability, default 1e-9"}}},
          "CreateModel": {"type": "object", "required": ["name", "dim", "k", "update_guard"], "properties": {
              "update_guard": {"description": "The clients' step (paper 003 Alg. 1): each update must be a plausible step from the instance its ticket drew; or \"off\" to accept any finite update.",
                  "oneOf": [{"$ref": "#/components/schemas/GuardSpec"}, {"const": "off"}]},
              "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$", "not": {"enum": [".", ".."]}},
              "dim": {"type": "integer", "minimum": 1}, "k": {"type": "integer", "minimum": 1},
              "init_std": {"type": "number", "minimum": 0},
              "spam_sigmas": {"type": "number", "minimum": 1, "maximum": 1000,
                  "description": "Spam filter band in standard deviations across the instances; no filter if absent. Use at least 8: the instances share ancestry, so narrower bands reject many honest updates (k = 20, 387 weights: 53% at 4, 6% at 5, 0.085% at 8)."},
              "spam_max_outside_fraction": {"type": "number", "minimum": 0, "exclusiveMaximum": 1}}},
          "Model": {"type": "object", "properties": {
              "name": {"type": "string"}, "dim": {"type": "integer"}, "k": {"type": "integer"},
              "init_std": {"type": "number"}, "spam_sigmas": {"type": ["number", "null"]},
              "spam_max_outside_fraction": {"type": ["number", "null"]},
              "update_guard": {"oneOf": [{"$ref": "#/components/schemas/GuardSpec"}, {"const": "off"}]},
              "updates_accepted": {"type": "integer"}, "updates_rejected": {"type": "integer"},
              "mean": {"type": "array", "items": {"type": "number"}},
              "intra_model_variance": {"type": "number"}}}
        }
      },
      "paths": {
        "/v1/models": {"post": {"summary": "Create a model (admin)", "security": [{"admin": []}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CreateModel"}}}},
            "responses": {"201": {"description": "created"}, "400": err("invalid parameters"),
                          "401": err("no bearer token"), "403": err("wrong token"), "409": err("exists"),
                          "507": err("the server's cap on total model memory (--max-model-bytes) would be exceeded")}}},
        "/v1/models/{name}": {
          "get": {"summary": "Counters, mean model and intra-model variance",
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "the model (for models of more than 2^18 floats, a view shared for up to 1 s)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Model"}}}}, "404": err("unknown model"),
                          "503": err("too many large views being rendered; retry after Retry-After")}},
          "delete": {"summary": "Delete a model (admin)", "security": [{"admin": []}],
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"204": {"description": "deleted"}, "401": err("no bearer token"), "403": err("wrong token"), "404": err("unknown model")}}},
        "/v1/models/{name}/draw": {"get": {"summary": "A uniformly random instance, with a single-use ticket for the update computed from it",
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "weights; header Privfed-Ticket: 32 hex digits (valid 10 minutes, one update)",
                "headers": {"Privfed-Ticket": {"schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}}},
                "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Weights"}},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary", "description": "dim little-endian f32"}}}},
              "404": err("unknown model"),
              "429": err("rate_limited (--rate-limit), or tickets_full: this client holds its share of tickets (--tickets-per-client), or the model's tickets are all younger than the step time (--ticket-step-secs); retry after Retry-After"),
              "500": err("the model is quarantined (damaged records)")}}},
        "/v1/models/{name}/updates": {"post": {"summary": "Submit an updated model; it overwrites a uniformly random instance",
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                           {"name": "Privfed-Ticket", "in": "header", "required": false, "schema": {"type": "string"},
                            "description": "The draw's ticket; required by models with an update guard. A retry with the same ticket is applied once. The ticket, model, content type and declared length are checked before the body is read: a refused update's body is never read."}],
            "requestBody": {"required": true, "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Weights"}},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
            "responses": {"202": {"description": "accepted and durable: {\"status\": \"accepted\"}; with \"replayed\": true for a retry of a ticket already applied; with \"durable\": false on a Redis store run in best-effort mode"},
                          "400": err("malformed: wrong length, non-finite, bad ticket"),
                          "409": err("ticket_invalid: unknown, expired, used by a concurrent request, or its instance retired; draw again (body field reason says which)"),
                          "428": err("ticket_required: the model's update guard needs the draw's ticket"),
                          "429": err("rate_limited: this client's limit on draws and updates (--rate-limit) is exhausted; retry after Retry-After"),
                          "503": err("the store cannot persist now (failed or stalled disk, lost data directory, Redis outage or persistence off), or the budget of bodies read at once is spent; retry after Retry-After"),
                          "404": err("unknown model"), "413": err("body too large"), "415": err("unsupported content type"),
                          "408": err("the body did not arrive within the body timeout"),
                          "422": err("rejected_by_guard (not a plausible client step from the drawn instance) or rejected_by_spam_filter; body fields reason and rejection say why")}}},
        "/healthz": {"get": {"summary": "Liveness and store health", "responses": {"200": {"description": "ok"}, "503": {"description": "store unavailable"}}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text exposition format"}}}},
        "/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        "/v1/secagg/rounds": {"post": {"summary": "Create a secure-aggregation round (admin); body {clients, bits, dim, threshold?, graph? (auto|complete|plus|{harary:{degree}}), dropout?, stage_timeout_ms?, threat_model? (honest-but-curious|active), roster? (active), open? (honest-but-curious: anyone may join, no tickets)}",
            "security": [{"admin": []}],
            "responses": {"201": {"description": "{round, config, join_tickets?}: join_tickets, one single-use ticket per client, for an honest-but-curious round that is not open"}, "400": err("invalid parameters"), "401": err("no token"), "403": err("wrong token")}}},
        "/v1/secagg/rounds/{id}": {
            "get": {"summary": "A round's public state: status, stage, config, joined, pending, pending_clients, stage_deadline_ms, survivors, version (advanced by every change of the round)",
                "responses": {"200": {"description": "state"}, "404": err("unknown round")}},
            "delete": {"summary": "Delete a round and its messages (admin)", "security": [{"admin": []}],
                "responses": {"204": {"description": "deleted"}, "404": err("unknown round")}}},
        "/v1/secagg/rounds/{id}/join": {"post": {"summary": "Join during the first stage: {client, token, config}. Body: {device, signature} (active rounds: an enrolled device's signature of the round), {ticket} (honest-but-curious rounds: one of the round's join tickets), or none (open rounds)",
            "responses": {"200": {"description": "joined"}, "400": err("malformed credential"), "401": err("no credential"), "403": err("device not enrolled, bad signature or unknown ticket"), "404": err("unknown round"), "409": err("full or started, device already joined, or ticket used")}}},
        "/v1/secagg/rounds/{id}/messages": {"post": {"summary": "A client's protocol message (postcard ClientMessage); Authorization: Bearer CLIENT_TOKEN",
            "requestBody": {"required": true, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
            "responses": {"202": {"description": "{\"status\": \"accepted\"} (stored durably)"}, "200": {"description": "{\"status\": \"duplicate\"}: a retry"},
                          "400": err("malformed message"), "401": err("no token"), "403": err("token does not match the sender"),
                          "409": err("stale or early stage, other session, or a different message for a stage already answered"),
                          "413": err("body too large"), "422": err("protocol_violation"), "503": err("store unavailable; retry")}}},
        "/v1/secagg/rounds/{id}/next": {"get": {"summary": "Long poll (client, wait ≤ 30 s) for the message that opens the client's next stage (postcard ServerMessage)",
            "responses": {"200": {"description": "the message"}, "204": {"description": "not yet"}, "410": {"description": "the round is over for this client: {status, reason}"}, "403": err("wrong token")}}},
        "/v1/secagg/rounds/{id}/close": {"post": {"summary": "Close the current stage now (admin; an operator's deadline)", "security": [{"admin": []}],
            "responses": {"204": {"description": "closed"}, "409": err("the round is over")}}},
        "/v1/secagg/rounds/{id}/result": {"get": {"summary": "A finished round's sum mod 2^bits, survivors and recovered dropouts (admin)", "security": [{"admin": []}],
            "responses": {"200": {"description": "{sum, survivors, dropped}"}, "409": err("not finished, or aborted (the reason)")}}}
      }
    })
}
