//! Environment variables that were renamed: the old name is still read (for
//! scripts written against it), with a warning that names the new one.

/// `(old, new)`: one name per setting across kbot's programs, so the server
/// URL and the log filter read the same in the CLI, the server and the agent.
pub const RENAMED: &[(&str, &str)] =
    &[("KBOT_SERVER", "KBOT_SERVER_URL"), ("RUST_LOG", "KBOT_LOG")];

/// What adopting an old name did.
#[derive(Debug, PartialEq, Eq)]
pub struct Adopted {
    pub old: &'static str,
    pub new: &'static str,
    /// The new name was set too, and won.
    pub ignored: bool,
}

impl std::fmt::Display for Adopted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ignored {
            write!(f, "{} is ignored: {} is set and wins", self.old, self.new)
        } else {
            write!(
                f,
                "{} is read as {}, its new name; rename it",
                self.old, self.new
            )
        }
    }
}

/// The values to set under the new names, and what to warn about: `get`
/// reads the environment. An old name only fills a new name that is unset.
pub fn adopt(get: impl Fn(&str) -> Option<String>) -> (Vec<(&'static str, String)>, Vec<Adopted>) {
    let mut set = Vec::new();
    let mut said = Vec::new();
    for &(old, new) in RENAMED {
        let Some(value) = get(old) else { continue };
        let ignored = get(new).is_some();
        if !ignored {
            set.push((new, value));
        }
        said.push(Adopted { old, new, ignored });
    }
    (set, said)
}

/// Applies [`adopt`] to this process's environment. Called first in `main`,
/// before any thread starts (setting variables is only sound then).
pub fn adopt_in_process() -> Vec<Adopted> {
    let (set, said) = adopt(|name| std::env::var(name).ok());
    for (name, value) in set {
        std::env::set_var(name, value);
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_name_fills_an_unset_new_one_and_never_overrides_it() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        let (set, said) = adopt(env(&[("KBOT_SERVER", "http://a:1")]));
        assert_eq!(set, vec![("KBOT_SERVER_URL", "http://a:1".to_string())]);
        assert_eq!(
            said[0].to_string(),
            "KBOT_SERVER is read as KBOT_SERVER_URL, its new name; rename it"
        );
        let (set, said) = adopt(env(&[("RUST_LOG", "debug"), ("KBOT_LOG", "warn")]));
        assert!(set.is_empty());
        assert!(said[0].ignored);
        let (set, said) = adopt(env(&[("KBOT_LOG", "warn")]));
        assert!(set.is_empty() && said.is_empty());
    }
}
