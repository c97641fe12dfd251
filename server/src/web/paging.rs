//! Pagination and filter links shared by the dashboard's list pages: every
//! list is filtered and paged by its URL, so a view can be bookmarked and
//! works without JavaScript.

/// Page numbers start at 1; `per_page` rows each.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    pub page: u32,
    pub per_page: u32,
}

impl Paging {
    pub fn new(page: Option<u32>, per_page: u32) -> Paging {
        Paging {
            page: page.unwrap_or(1).max(1),
            per_page,
        }
    }

    /// SQL `OFFSET` of this page.
    pub fn offset(&self) -> i64 {
        i64::from(self.page - 1) * i64::from(self.per_page)
    }

    /// SQL `LIMIT`: one row more than a page, to know whether a next exists.
    pub fn limit_probe(&self) -> i64 {
        i64::from(self.per_page) + 1
    }

    /// This page's slice of an in-memory list.
    pub fn slice<'a, T>(&self, all: &'a [T]) -> &'a [T] {
        let start = usize::try_from(self.offset())
            .unwrap_or(usize::MAX)
            .min(all.len());
        let end = start.saturating_add(self.per_page as usize).min(all.len());
        &all[start..end]
    }
}

/// The "previous / page N / next" links of a list.
#[derive(Debug, Clone, Default)]
pub struct Pager {
    pub page: u32,
    pub prev: Option<String>,
    pub next: Option<String>,
}

impl Pager {
    /// Links for `paging` on `path` with the list's `filters`; `has_next`
    /// says whether rows exist past this page.
    pub fn new(path: &str, filters: &[(&str, String)], paging: Paging, has_next: bool) -> Pager {
        let to = |page: u32| {
            let mut params: Vec<(&str, String)> = filters.to_vec();
            params.push(("page", page.to_string()));
            link(path, &params)
        };
        Pager {
            page: paging.page,
            prev: (paging.page > 1).then(|| to(paging.page - 1)),
            next: has_next.then(|| to(paging.page + 1)),
        }
    }
}

/// `path?k=v&...` with the values URL-encoded; empty values are left out.
pub fn link(path: &str, params: &[(&str, String)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in params.iter().filter(|(_, v)| !v.is_empty()) {
        query.append_pair(k, v);
    }
    let query = query.finish();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

/// A filter value from the URL: trimmed, empty as none.
pub fn filter(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// `?limit=N&before=ID` of an API list, newest first (keyset paging: the
/// next page asks for ids below the last one it got).
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Keyset {
    /// At most this many (default 50, at most 500).
    pub limit: Option<u32>,
    /// Only items with a smaller id (paging, newest first).
    pub before: Option<i64>,
}

impl Keyset {
    /// The page size asked for, 50 by default.
    pub fn limit(&self) -> u32 {
        self.limit.unwrap_or(50)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_encode_and_skip_empty_values() {
        assert_eq!(
            link(
                "/trends",
                &[("metric", "a.MB/sec".into()), ("repo", String::new())]
            ),
            "/trends?metric=a.MB%2Fsec"
        );
        assert_eq!(link("/machines", &[]), "/machines");
    }

    #[test]
    fn pages_slice_and_link() {
        let p = Paging::new(Some(2), 3);
        assert_eq!(p.slice(&[1, 2, 3, 4, 5]), &[4, 5]);
        assert_eq!(Paging::new(Some(9), 3).slice(&[1, 2]), &[] as &[i32]);
        assert_eq!(Paging::new(Some(0), 3).page, 1);
        let pager = Pager::new("/x", &[("q", "a b".into())], p, true);
        assert_eq!(pager.prev.as_deref(), Some("/x?q=a+b&page=1"));
        assert_eq!(pager.next.as_deref(), Some("/x?q=a+b&page=3"));
    }
}
