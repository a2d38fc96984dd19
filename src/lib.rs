//! callcheck measures how reliably models served behind OpenAI-compatible endpoints emit tool
//! calls and structured output on the wire.
//!
//! The pipeline, one direction of data: [`task::Task`] + [`transcript::Transcript`] →
//! [`score::Verdict`] (the decision procedure) → the matrix and the site.
//!
//! ## Floors: imports point down
//!
//! Each module imports only modules on floors below its own; a module's own folder is its
//! business. When a second caller needs what a higher floor computes, the thing moves down to
//! a floor both can reach; nobody reaches up. `tests/it/layering.rs` reads this table and every
//! `crate::…` path outside a unit test, and fails on a path that points up or sideways.
//!
//! | floor | modules | what they are |
//! |---|---|---|
//! | 0 | `taxonomy` `json` `fsafe` `names` `term` `endpoint` `transcript` `reply` `stats` | the vocabulary, file safety, addresses as kept, the statistics |
//! | 1 | `task` | the task model and what it accepts |
//! | 2 | `request` `runs` `server` `corrupt` | requests, the `runs/` tree and its server record, corrupted replies |
//! | 3 | `score` | the decision procedure |
//! | 4 | `follow_up` `hitec` `lint` `synth` | follow-up requests, the HiTEC view, corpus checks, synthetic runs |
//! | 5 | `report` | aggregates: the matrix, routing |
//! | 6 | `evidence` | from `runs/` (or a site's `samples.csv`) to scored samples |
//! | 7 | `compare` | two rows compared |
//! | 8 | `site` | pages and data files, pure |
//! | 9 | `pipeline` `collect` `mock` `import` `export` | the build's orchestration and writing; the network; other formats |
//! | 10 | `cli` | the command line's types |
//! | 11 | `cmd` | one module per subcommand |

pub mod cli;
pub mod cmd;
pub mod collect;
pub mod compare;
pub mod corrupt;
pub(crate) mod endpoint;
pub(crate) mod evidence;
pub(crate) mod export;
pub mod follow_up;
pub(crate) mod fsafe;
pub(crate) mod hitec;
pub(crate) mod import;
pub(crate) mod json;
pub mod lint;
pub mod mock;
pub(crate) mod names;
pub(crate) mod pipeline;
pub mod reply;
pub mod report;
pub mod request;
pub mod runs;
pub mod score;
pub mod server;
pub mod site;
pub mod stats;
pub mod synth;
pub mod task;
pub mod taxonomy;
pub mod term;
pub mod transcript;
