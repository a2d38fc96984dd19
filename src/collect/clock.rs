//! Wall-clock stamps for cell.json and run ids (collect only: build never reads the clock).

use std::time::{SystemTime, UNIX_EPOCH};

/// Civil date (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Broken-down UTC time of a Unix timestamp: (y, mo, d, h, mi, s).
fn parts(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    (
        y,
        mo,
        d,
        (sod / 3600) as u32,
        (sod % 3600 / 60) as u32,
        (sod % 60) as u32,
    )
}

fn now() -> (i64, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() as i64, d.subsec_millis())
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-03-17T14:25:01.123Z`.
pub fn rfc3339_now() -> String {
    let (s, ms) = now();
    rfc3339(s, ms)
}

/// RFC 3339 UTC of a Unix timestamp and milliseconds.
pub fn rfc3339(secs: i64, ms: u32) -> String {
    let (y, mo, d, h, mi, s) = parts(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// Compact UTC stamp for run ids, e.g. `20260317T142501Z`: sorts chronologically as text.
pub fn compact_now() -> String {
    let (y, mo, d, h, mi, s) = parts(now().0);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_767_225_600, 0), "2026-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }
}
