//! Latency and size beside reliability: median and p95 of time to first byte, total time and
//! completion tokens over a set of samples (a model, or a model × tag). Pure and
//! deterministic: nearest-rank percentiles on sorted values, no interpolation.

/// Median and p95 of one quantity over `n` samples that recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spread {
    pub n: u64,
    pub median: f64,
    pub p95: f64,
}

/// Where the nearest-rank `q` quantile (0 < q ≤ 1) of `n` values sits once they are sorted: the
/// smallest value with at least a share `q` of the values at or below it.
fn rank(n: usize, q: f64) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n) - 1
}

impl Spread {
    /// `None` when no sample recorded the quantity.
    pub fn of(mut values: Vec<f64>) -> Option<Spread> {
        values.retain(|v| v.is_finite());
        if values.is_empty() {
            return None;
        }
        // The two ranks are selected, not sorted for: the values a whole sort puts there.
        let (m, p) = (rank(values.len(), 0.5), rank(values.len(), 0.95));
        let (_, &mut median, above) = values.select_nth_unstable_by(m, f64::total_cmp);
        let p95 = if p == m {
            median
        } else {
            *above.select_nth_unstable_by(p - m - 1, f64::total_cmp).1
        };
        Some(Spread {
            n: values.len() as u64,
            median,
            p95,
        })
    }
}

/// Latency and size of a set of samples: only samples with a model outcome count (a transport
/// error's timing is the network's, and it has no completion).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    /// Milliseconds to the first byte of the response body.
    pub ttfb_ms: Option<Spread>,
    /// Milliseconds from sending to the last byte (retries included).
    pub total_ms: Option<Spread>,
    /// `usage.completion_tokens` as the server reported it.
    pub completion_tokens: Option<Spread>,
}

/// Collects the three quantities, then [`Accumulator::finish`] summarises them.
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    ttfb: Vec<f64>,
    total: Vec<f64>,
    tokens: Vec<f64>,
}

impl Accumulator {
    pub fn add(&mut self, s: &super::Scored) {
        if !s.outcome.is_scored() {
            return;
        }
        self.ttfb.extend(s.ttfb_ms);
        self.total.extend(s.total_ms);
        self.tokens.extend(s.completion_tokens.map(|t| t as f64));
    }

    pub fn finish(self) -> Latency {
        Latency {
            ttfb_ms: Spread::of(self.ttfb),
            total_ms: Spread::of(self.total),
            completion_tokens: Spread::of(self.tokens),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let s = Spread::of((1..=20).map(f64::from).collect()).unwrap();
        assert_eq!((s.n, s.median, s.p95), (20, 10.0, 19.0));
        let s = Spread::of(vec![5.0, f64::NAN, 1.0, 3.0]).unwrap();
        assert_eq!((s.n, s.median, s.p95), (3, 3.0, 5.0));
        assert_eq!(Spread::of(vec![]), None);
        let one = Spread::of(vec![7.0]).unwrap();
        assert_eq!((one.median, one.p95), (7.0, 7.0));
    }

    #[test]
    fn selected_ranks_are_the_sorted_ones() {
        let mut rng = crate::stats::compare::SplitMix64::new(7);
        for n in 1..200 {
            // Ties, signed zeros and a spread of magnitudes.
            let values: Vec<f64> = (0..n)
                .map(|_| match (rng.unit() * 4.0) as u32 {
                    0 => 0.0,
                    1 => -0.0,
                    2 => (rng.unit() * 10.0).floor(),
                    _ => rng.unit() * 1e4,
                })
                .collect();
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let s = Spread::of(values).unwrap();
            let at = |q: f64| sorted[rank(n, q)].to_bits();
            assert_eq!(
                (s.median.to_bits(), s.p95.to_bits()),
                (at(0.5), at(0.95)),
                "{n}"
            );
        }
    }
}
