//! Small statistics for repeated measurements.

/// The median of `samples` (the mean of the middle two for an even count); `None` if empty or
/// if any sample is not a number.
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// `a / b`, or `None` when either is missing or `b` is zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn ratio_needs_both_sides() {
        assert_eq!(ratio(Some(4.0), Some(2.0)), Some(2.0));
        assert_eq!(ratio(Some(4.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(2.0)), None);
    }
}
