//! Exports of scored transcripts for other tools: `preference` turns failures (real ones from
//! runs/, synthetic ones from the corruption families) into datasets a fine-tuning library reads.

pub mod preference;
