//! Renderers: recordings and findings as the report table, the txg table,
//! flame graphs and the Prometheus exposition.

pub mod compare;
pub mod exposition;
pub mod findings;
pub mod flamegraph;
mod flamegraph_header;
pub mod pprof;
pub mod report;
pub mod top;
pub mod top_vdevs;
pub mod txgs;
