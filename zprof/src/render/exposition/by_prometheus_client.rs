//! The stage histograms of an exposition written two ways from the same
//! grouping: by zprof's own writer, and by prometheus-client's OpenMetrics
//! encoder. Only for `benches/exposition.rs` (`--features
//! encoder-comparison`), which measures whether the project's writer is worth
//! keeping against a well-kept encoder; serve never uses the second.

use prometheus_client::{
    encoding::{DescriptorEncoder, NoLabelSet},
    metrics::MetricType,
    registry::Registry,
};

use super::{BYTE_SHIFTS, Family, Labels, Options, Series, TIME_SHIFTS, group, histogram_family};
use crate::recording::live::Scrape;

/// zprof's writer: the stage histogram families, as `render` writes them.
pub fn by_zprof(scrape: &Scrape, options: &Options) -> String {
    let grouped = group(scrape, options);
    let mut out = String::new();
    for (family, by_labels) in grouped.timed.values() {
        histogram_family(&mut out, family, by_labels);
    }
    out
}

/// prometheus-client's OpenMetrics encoder on the same families and series.
pub fn by_prometheus_client(scrape: &Scrape, options: &Options) -> String {
    let grouped = group(scrape, options);
    let families = grouped
        .timed
        .values()
        .map(|(family, by_labels)| histogram(family, by_labels))
        .collect();
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Histograms(families)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String");
    out
}

/// One family: name, help and each series' labels, sum, count and buckets
/// (upper bound, calls in that bucket alone).
type Histogram = (
    String,
    &'static str,
    Vec<(Vec<(&'static str, String)>, f64, u64, Vec<(f64, u64)>)>,
);

#[derive(Debug)]
struct Histograms(Vec<Histogram>);

impl prometheus_client::collector::Collector for Histograms {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, help, series) in &self.0 {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
            for (labels, sum, count, buckets) in series {
                family
                    .encode_family(labels)?
                    .encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)?;
            }
        }
        Ok(())
    }
}

fn histogram(family: &Family, by_labels: &std::collections::BTreeMap<Labels, Series>) -> Histogram {
    let (unit, shifts, scale) = if family.stage.values_are_bytes() {
        ("bytes", BYTE_SHIFTS, 1.0)
    } else {
        ("duration_seconds", TIME_SHIFTS, 1e-9)
    };
    let series = by_labels
        .iter()
        .map(|(labels, series)| {
            let mut buckets = Vec::new();
            let mut below = 0;
            for (shift, now) in shifts.clone().zip(series.below_each(shifts.clone())) {
                buckets.push(((1u64 << shift) as f64 * scale, now - below));
                below = now;
            }
            buckets.push((f64::INFINITY, series.count - below));
            (
                label_vector(family, labels),
                series.total as f64 * scale,
                series.count,
                buckets,
            )
        })
        .collect();
    (format!("zfs_{}_{unit}", family.name), family.help, series)
}

/// The labels `label_pairs` writes, as pairs (the encoder escapes them).
fn label_vector(family: &Family, labels: &Labels) -> Vec<(&'static str, String)> {
    let mut pairs = vec![("pool", labels.pool.clone())];
    if !labels.class.is_empty() {
        pairs.push((family.class_label, labels.class.clone()));
    }
    if let Some(top) = &labels.top_vdev {
        pairs.push(("top_vdev", top.clone()));
    }
    if let Some(class) = &labels.vdev_class {
        pairs.push(("vdev_class", class.clone()));
    }
    if let Some(vdev) = labels.vdev {
        pairs.push(("vdev_guid", vdev.to_string()));
    }
    pairs
}
