//! Medians and percentiles.

/// The median of `values` (the mean of the two middle values for an even count), `None`
/// for an empty slice. NaNs sort last.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The nearest-rank `p`-th percentile (0 < p <= 100) of sorted `sorted`: the smallest
/// value that at least p % of the values are less than or equal to.
pub fn percentile_sorted<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Median and 99th percentile of round-trip times in nanoseconds, in microseconds.
pub fn latency_us(samples_ns: &mut [u64]) -> Option<(f64, f64)> {
    if samples_ns.is_empty() {
        return None;
    }
    samples_ns.sort_unstable();
    let n = samples_ns.len();
    let med = if n % 2 == 1 {
        samples_ns[n / 2] as f64
    } else {
        (samples_ns[n / 2 - 1] as f64 + samples_ns[n / 2] as f64) / 2.0
    };
    let p99 = percentile_sorted(samples_ns, 99.0)? as f64;
    Some((med / 1000.0, p99 / 1000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[10.0, 1.0, 1.0, 1.0, 10.0]), Some(1.0));
    }

    #[test]
    fn percentile_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 99.0), Some(99));
        assert_eq!(percentile_sorted(&v, 100.0), Some(100));
        assert_eq!(percentile_sorted(&v, 50.0), Some(50));
        assert_eq!(percentile_sorted(&v, 0.5), Some(1));
        assert_eq!(percentile_sorted(&[7u64], 99.0), Some(7));
        assert_eq!(percentile_sorted::<u64>(&[], 99.0), None);
        assert_eq!(percentile_sorted(&v, 0.0), None);
        assert_eq!(percentile_sorted(&v, 101.0), None);
        // 10 values: p99 is the largest.
        let w: Vec<u64> = (1..=10).collect();
        assert_eq!(percentile_sorted(&w, 99.0), Some(10));
    }

    #[test]
    fn latency_in_microseconds() {
        let mut s: Vec<u64> = vec![3000, 1000, 2000, 100_000];
        let (med, p99) = latency_us(&mut s).unwrap();
        assert_eq!(med, 2.5);
        assert_eq!(p99, 100.0);
        assert_eq!(latency_us(&mut []), None);
    }
}
