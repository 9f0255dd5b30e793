//! The command line: clap's definitions and the subcommands, which compose
//! the layers below (collect, analyze, render) into `record`, `run`,
//! `report`, `explain`, `compare`, `flamegraph`, `serve` and `top`; and
//! `generate`, its own man pages and completions.

pub mod args;
mod child;
pub mod commands;
pub mod common;
mod compare;
mod explain;
mod flamegraph;
mod generate;
mod offsets;
mod probes;
mod record;
mod report;
pub mod serve;
mod serve_http;
mod service;
pub mod top;
mod web_config;
