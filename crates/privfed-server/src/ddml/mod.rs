//! Draw-and-Discard over HTTP: the routes ([`api`]), the model specification ([`model`]), the
//! draw tickets ([`ticket`]) and the stores that persist the decisions of `privfed_ddml`
//! ([`store`]).

pub mod api;
pub mod model;
pub mod store;
pub mod ticket;
