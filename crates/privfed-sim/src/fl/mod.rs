//! Federated learning simulation (issue 13): federated datasets ([`data`]), and the training loop
//! that runs local randomizers, central DP, distributed DP and real secure aggregation with the ε
//! of every round accounted.

pub mod data;
