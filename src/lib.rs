//! callcheck measures how reliably models served behind OpenAI-compatible endpoints emit tool
//! calls and structured output on the wire.
//!
//! The pipeline, one direction of data: [`task::Task`] + [`transcript::Transcript`] →
//! [`score::Verdict`] (the decision procedure) → the matrix and the site.

pub mod cli;
pub mod cmd;
pub mod collect;
pub mod compare;
pub mod corrupt;
pub mod export;
pub mod feedback;
pub mod fsafe;
pub mod hitec;
pub mod import;
pub mod json;
pub mod mock;
pub mod names;
pub mod pipeline;
pub mod reply;
pub mod report;
pub mod request;
pub mod runs;
pub mod score;
pub mod site;
pub mod stats;
pub mod synth;
pub mod task;
pub mod taxonomy;
pub mod term;
pub mod transcript;
