//! What the integration tests share: running the real binary and the real mock server
//! (`collect`), loading the scorer's fixture folders (`fixture`), and building sites from run
//! trees written on the spot (`site`).

pub mod collect;
pub mod fixture;
pub mod site;
