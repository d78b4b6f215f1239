//! The README stays short, its links and the docs' links resolve, and papers are named by
//! their authors and year in every page and every `--help`.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![Path::new(ROOT).join("README.md")];
    let docs = std::fs::read_dir(Path::new(ROOT).join("docs")).unwrap();
    pages.extend(
        docs.flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
    pages
}

#[test]
fn the_readme_is_under_12_kb() {
    let size = std::fs::metadata(Path::new(ROOT).join("README.md"))
        .unwrap()
        .len();
    assert!(size < 12 * 1024, "README.md is {size} bytes");
}

#[test]
fn relative_links_resolve() {
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in text.split("](").skip(1) {
            let target = link.split(')').next().unwrap();
            if target.contains("://") || target.starts_with('#') {
                continue;
            }
            let path = page
                .parent()
                .unwrap()
                .join(target.split('#').next().unwrap());
            assert!(path.exists(), "{}: no {target}", page.display());
        }
    }
}

#[test]
fn papers_are_named_by_authors_and_year() {
    let mut texts: Vec<(String, String)> = pages()
        .into_iter()
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    for sub in [
        "run", "report", "compare", "replay", "generate", "figures", "gpu",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_matchshim"))
            .args([sub, "--help"])
            .output()
            .unwrap();
        texts.push((
            format!("{sub} --help"),
            String::from_utf8(out.stdout).unwrap(),
        ));
    }
    for (origin, text) in texts {
        let lower = text.to_lowercase();
        for bad in ["paper 000", "paper 001", "paper 004", "a ci/bench program"] {
            assert!(!lower.contains(bad), "{origin} says {bad:?}");
        }
    }
}
