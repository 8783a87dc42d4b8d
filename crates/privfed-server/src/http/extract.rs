//! Request extractors shared by the routes.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

/// The client's address, when the server knows it (`ConnectInfo` from the accept loop; absent
/// when the router is called in process).
pub struct Peer(pub Option<std::net::IpAddr>);

impl<St: Send + Sync> FromRequestParts<St> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &St) -> Result<Self, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|c| c.0.ip()),
        ))
    }
}
