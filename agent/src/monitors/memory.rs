//! Memory gauges of /proc: /proc/meminfo, /proc/buddyinfo and
//! /proc/slabinfo. LKP samples them every second and averages the samples;
//! kbot reads them once, after the measured runs, and reports those values
//! (the guest's /init does not read them before the runs at all).

use kbot_core::parsers::Metrics;

/// `meminfo.<field>` (LKP's names, e.g. `meminfo.MemFree`,
/// `meminfo.Active(anon)`, `meminfo.HugePages_Total`): each line's value as
/// /proc/meminfo gives it (kB, or a page count for `HugePages_*`), after the
/// runs; and LKP's `meminfo.Memused`, MemTotal − MemFree. LKP's
/// `max_used_kB` (the largest Memused over the samples) is left out: one
/// sample has no maximum to speak of.
pub fn meminfo(after: &str) -> Metrics {
    let mut m: Metrics = after
        .lines()
        .filter_map(|l| {
            let (key, rest) = l.split_once(':')?;
            let value: u64 = rest.split_whitespace().next()?.parse().ok()?;
            let key = key.trim();
            (!key.is_empty() && !key.contains(char::is_whitespace))
                .then(|| (format!("meminfo.{key}"), value as f64))
        })
        .collect();
    if let (Some(total), Some(free)) = (m.get("meminfo.MemTotal"), m.get("meminfo.MemFree")) {
        let used = (total - free).max(0.0);
        m.insert("meminfo.Memused".to_string(), used);
    }
    m
}

/// `buddyinfo.Node.<n>.zone.<zone>.<order>` (LKP's names, e.g.
/// `buddyinfo.Node.0.zone.Normal.3`): free blocks of each order in each
/// zone after the runs.
pub fn buddyinfo(after: &str) -> Metrics {
    let mut m = Metrics::new();
    for line in after.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [node_word, node, zone_word, zone, counts @ ..] = w.as_slice() else {
            continue;
        };
        let Some(node) = node.strip_suffix(',') else {
            continue;
        };
        if *node_word != "Node" || *zone_word != "zone" || counts.is_empty() {
            continue;
        }
        for (order, count) in counts.iter().enumerate() {
            if let Ok(count) = count.parse::<u64>() {
                m.insert(
                    format!("buddyinfo.Node.{node}.zone.{zone}.{order}"),
                    count as f64,
                );
            }
        }
    }
    m
}

/// `slabinfo.<cache>.active_objs` and `slabinfo.<cache>.num_objs` (LKP's
/// names) after the runs, from /proc/slabinfo version 2.1 (SLAB, or SLUB
/// with CONFIG_SLUB_DEBUG; SLOB kernels such as a plain `tinyconfig` have no
/// such file). LKP also reports `active_slabs` and `num_slabs`; kbot keeps
/// the two object counts only, and leaves out caches without objects (their
/// 0 is what `lkp compare` assumes for a missing stat): about 2 × 100
/// metrics on a SLUB kernel instead of 4 × 200.
pub fn slabinfo(after: &str) -> Metrics {
    let mut lines = after.lines();
    if lines
        .next()
        .is_none_or(|l| l.trim() != "slabinfo - version: 2.1")
    {
        return Metrics::new();
    }
    let Some(header) = lines.next().and_then(|l| l.strip_prefix("# name")) else {
        return Metrics::new();
    };
    let columns: Vec<&str> = header.split_whitespace().collect();
    let column = |name: &str| columns.iter().position(|c| *c == name);
    let (Some(active), Some(num)) = (column("<active_objs>"), column("<num_objs>")) else {
        return Metrics::new();
    };
    let mut m = Metrics::new();
    for line in lines {
        let mut words = line.split_whitespace();
        let Some(cache) = words.next() else {
            continue;
        };
        let values: Vec<&str> = words.collect();
        if values.len() != columns.len() {
            continue;
        }
        let (Ok(a), Ok(n)) = (values[active].parse::<u64>(), values[num].parse::<u64>()) else {
            continue;
        };
        if a == 0 && n == 0 {
            continue;
        }
        m.insert(format!("slabinfo.{cache}.active_objs"), a as f64);
        m.insert(format!("slabinfo.{cache}.num_objs"), n as f64);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This host's /proc/meminfo (the format is the same on 6.1), trimmed.
    const MEMINFO: &str = "\
MemTotal:       24683568 kB
MemFree:        19381676 kB
MemAvailable:   23533196 kB
Cached:          3718828 kB
Active(anon):      22376 kB
Inactive(file):  2083008 kB
AnonPages:        497632 kB
Slab:             831552 kB
KernelStack:        2608 kB
PageTables:         5812 kB
VmallocTotal:   34359738367 kB
Percpu:              792 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
DirectMap2M:     2068480 kB
";

    #[test]
    fn meminfo_gives_each_line_in_kb_and_memused() {
        let m = meminfo(MEMINFO);
        assert_eq!(m.len(), 17, "{m:?}");
        assert_eq!(m.get("meminfo.MemTotal"), Some(&24683568.0));
        assert_eq!(m.get("meminfo.MemFree"), Some(&19381676.0));
        assert_eq!(m.get("meminfo.Active(anon)"), Some(&22376.0));
        assert_eq!(m.get("meminfo.Inactive(file)"), Some(&2083008.0));
        assert_eq!(m.get("meminfo.VmallocTotal"), Some(&34359738367.0));
        assert_eq!(m.get("meminfo.HugePages_Total"), Some(&0.0));
        assert_eq!(m.get("meminfo.Hugepagesize"), Some(&2048.0));
        assert_eq!(m.get("meminfo.Memused"), Some(&5301892.0));
        // A missing file, or busybox's complaint about one, gives nothing.
        assert!(meminfo("").is_empty());
        assert!(meminfo("cat: can't open '/proc/meminfo': No such file or directory\n").is_empty());
    }

    /// This host's /proc/buddyinfo (x86_64, 4K pages: orders 0 to 10).
    const BUDDYINFO: &str = "\
Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 
Node 0, zone    DMA32      2      2      3      1      2      2      1      4      4      2    752 
Node 0, zone   Normal     82   2140   1808    219    246    699   1370   1011    504    197    180 
";

    #[test]
    fn buddyinfo_names_node_zone_and_order() {
        let m = buddyinfo(BUDDYINFO);
        assert_eq!(m.len(), 33);
        assert_eq!(m.get("buddyinfo.Node.0.zone.DMA.0"), Some(&0.0));
        assert_eq!(m.get("buddyinfo.Node.0.zone.DMA.10"), Some(&3.0));
        assert_eq!(m.get("buddyinfo.Node.0.zone.DMA32.10"), Some(&752.0));
        assert_eq!(m.get("buddyinfo.Node.0.zone.Normal.1"), Some(&2140.0));
        assert_eq!(m.get("buddyinfo.Node.0.zone.Normal.10"), Some(&180.0));
        assert!(
            buddyinfo("cat: can't open '/proc/buddyinfo': No such file or directory\n").is_empty()
        );
    }

    /// This host's /proc/slabinfo (SLUB), trimmed.
    const SLABINFO: &str = "\
slabinfo - version: 2.1
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>
btrfs_delayed_node      0      0    312   13    1 : tunables    0    0    0 : slabdata      0      0      0
skbuff_head_cache    352    352    256   16    1 : tunables    0    0    0 : slabdata     22     22      0
filp                 893    987    192   21    1 : tunables    0    0    0 : slabdata     47     47      0
task_struct          178    185   5888    5    8 : tunables    0    0    0 : slabdata     37     37      0
pid                  396    441    192   21    1 : tunables    0    0    0 : slabdata     21     21      0
kmalloc-1k           763    800   1024   16    4 : tunables    0    0    0 : slabdata     50     50      0
kmalloc-64          2718   3008     64   64    1 : tunables    0    0    0 : slabdata     47     47      0
";

    #[test]
    fn slabinfo_keeps_object_counts_of_used_caches() {
        let m = slabinfo(SLABINFO);
        assert_eq!(m.len(), 12, "{m:?}");
        assert_eq!(
            m.get("slabinfo.skbuff_head_cache.active_objs"),
            Some(&352.0)
        );
        assert_eq!(m.get("slabinfo.filp.active_objs"), Some(&893.0));
        assert_eq!(m.get("slabinfo.filp.num_objs"), Some(&987.0));
        assert_eq!(m.get("slabinfo.task_struct.num_objs"), Some(&185.0));
        assert_eq!(m.get("slabinfo.kmalloc-1k.active_objs"), Some(&763.0));
        assert_eq!(m.get("slabinfo.kmalloc-64.num_objs"), Some(&3008.0));
        assert!(!m.keys().any(|k| k.contains("btrfs_delayed_node")));
        assert!(!m.keys().any(|k| k.ends_with("_slabs")));
        // Another version's columns are not guessed at; nor is a missing file.
        assert!(slabinfo(&SLABINFO.replace("version: 2.1", "version: 1.1")).is_empty());
        assert!(slabinfo("cat: can't open '/proc/slabinfo': Permission denied\n").is_empty());
    }
}
