//! The committed man pages and completions match what the clap definitions generate.

use crate::util::*;

fn compare(committed: &str, generated: &std::path::Path) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(committed);
    let mut names: Vec<_> = std::fs::read_dir(generated)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    let mut committed_names: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| e.file_name())
        .collect();
    committed_names.sort();
    assert_eq!(
        names, committed_names,
        "{committed}/ has other files than the generator makes"
    );
    for n in names {
        let want = std::fs::read(generated.join(&n)).unwrap();
        let have = std::fs::read(root.join(&n)).unwrap();
        assert!(
            want == have,
            "{committed}/{} is stale: run `cargo run -- generate --man man --completions completions`",
            n.to_string_lossy()
        );
    }
}

#[test]
fn man_pages_and_completions_match_the_code() {
    let dir = tempdir();
    let man = dir.path().join("man");
    let comp = dir.path().join("completions");
    raidctl([
        "generate",
        "--man",
        &man.display().to_string(),
        "--completions",
        &comp.display().to_string(),
    ])
    .ok();
    compare("man", &man);
    compare("completions", &comp);
    // Issue #18: the pages pointed to pages that did not exist (raidctl-wear-plan(8)).
    for e in std::fs::read_dir(&man).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let plain = text.replace("\\-", "-");
        for (i, _) in plain.match_indices("raidctl-") {
            let rest = &plain[i..];
            let Some(end) = rest.find("(8)") else {
                continue;
            };
            let name = &rest[..end];
            if name.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                assert!(
                    man.join(format!("{name}.8")).exists(),
                    "{} points to {name}(8), which does not exist",
                    e.file_name().to_string_lossy()
                );
            }
        }
    }
    let page = std::fs::read_to_string(man.join("raidctl.8")).unwrap();
    assert!(
        page.contains("EXIT STATUS"),
        "exit codes must be documented in raidctl.8"
    );
}
