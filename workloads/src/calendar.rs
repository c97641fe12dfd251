//! UTC calendar formatting for the upstream tools' date lines (`ctime`,
//! `strftime`). A static binary in an initramfs has no time zone data, so
//! kbot-bench always prints UTC.

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A broken-down UTC time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tm {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    /// Days since 1970-01-01, for the weekday.
    days: i64,
}

impl Tm {
    pub fn from_epoch(secs: i64) -> Tm {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        Tm {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            min: (rem / 60 % 60) as u32,
            sec: (rem % 60) as u32,
            days,
        }
    }

    pub fn weekday(&self) -> &'static str {
        DAYS[self.days.rem_euclid(7) as usize]
    }

    pub fn month_name(&self) -> &'static str {
        MONTHS[(self.month - 1) as usize]
    }

    /// `ctime()` without the newline: "Mon Nov 30 04:10:00 2026".
    pub fn ctime(&self) -> String {
        format!(
            "{} {}{:3} {:02}:{:02}:{:02} {}",
            self.weekday(),
            self.month_name(),
            self.day,
            self.hour,
            self.min,
            self.sec,
            self.year
        )
    }

    /// strftime "%a %b %d %Y".
    pub fn date(&self) -> String {
        format!(
            "{} {} {:02} {}",
            self.weekday(),
            self.month_name(),
            self.day,
            self.year
        )
    }

    /// strftime "%H:%M:%S".
    pub fn hms(&self) -> String {
        format!("{:02}:{:02}:{:02}", self.hour, self.min, self.sec)
    }
}

#[cfg(test)]
mod tests {
    use super::Tm;

    #[test]
    fn known_dates() {
        let t = Tm::from_epoch(0);
        assert_eq!(t.ctime(), "Thu Jan  1 00:00:00 1970");
        // 2026-11-30 04:10:05 UTC is a Monday.
        let t = Tm::from_epoch(1_796_011_805);
        assert_eq!(t.ctime(), "Mon Nov 30 04:10:05 2026");
        assert_eq!(t.date(), "Mon Nov 30 2026");
        assert_eq!(Tm::from_epoch(951_782_400).date(), "Tue Feb 29 2000");
    }
}
