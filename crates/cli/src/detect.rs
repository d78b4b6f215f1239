//! Which MPI a program uses, from what it really loads: the libraries its ELF file needs, or,
//! for a Python program, the libraries that the MPI module it imports needs (mpi4py's extension
//! module, found by asking the interpreter itself, so its own path and version decide).

use crate::elf::Elf;
use crate::launch::stdout_within;
use crate::runs::{find_program, Mpi};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long the interpreter may take to say where mpi4py is.
const ASK_TIMEOUT: Duration = Duration::from_secs(20);

/// The MPI of `command` (a program and its arguments) and how that was found, in words that
/// end "… <MPI>": "./app links", "python3 imports mpi4py, whose MPI.so links".
pub fn program_mpi(command: &[String]) -> Option<(Mpi, String)> {
    let path = find_program(&command[0])?;
    let elf = Elf::read(&path).ok().flatten();
    if let Some(mpi) = elf.as_ref().and_then(Elf::mpi) {
        return Some((mpi, format!("{} links", command[0])));
    }
    let (interpreter, args) = python(&path, command)?;
    if !imports_mpi4py(&path, args) {
        return None;
    }
    let module = mpi4py_module(&interpreter)?;
    let mpi = Elf::read(&module).ok().flatten()?.mpi()?;
    Some((
        mpi,
        format!(
            "{} imports mpi4py, whose {} links",
            command[0],
            module.file_name()?.to_string_lossy()
        ),
    ))
}

/// The Python interpreter that runs `command` and the words it gets after its own name: the
/// program itself when it is named python…, or the one a script's `#!` line names.
fn python<'a>(path: &Path, command: &'a [String]) -> Option<(PathBuf, &'a [String])> {
    let named = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("python"))
    };
    if named(Path::new(&command[0])) || named(path) {
        return Some((path.to_path_buf(), &command[1..]));
    }
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = String::from_utf8_lossy(&head[..n]);
    let words: Vec<&str> = line
        .strip_prefix("#!")?
        .lines()
        .next()?
        .split_whitespace()
        .collect();
    // `#!/usr/bin/env python3` or `#!/usr/bin/python3 -u`.
    let interpreter = match words.first() {
        Some(env) if env.ends_with("/env") => words.get(1)?,
        Some(first) => first,
        None => return None,
    };
    let interpreter = find_program(interpreter)?;
    named(&interpreter).then_some((interpreter, command))
}

/// The Python words name mpi4py: `-m mpi4py…`, `-c` code, or a script that mentions it.
fn imports_mpi4py(program: &Path, args: &[String]) -> bool {
    let mentions =
        |p: &Path| std::fs::read(p).is_ok_and(|text| text.windows(6).any(|w| w == b"mpi4py"));
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "-m" | "-c" => return words.next().is_some_and(|w| w.contains("mpi4py")),
            w if w.starts_with('-') => continue,
            script => {
                let script = Path::new(script);
                // A script run by its `#!` line is the program itself.
                return mentions(script) || (script == program && mentions(program));
            }
        }
    }
    false
}

/// Where `interpreter` imports `mpi4py.MPI` from (the extension module that links the MPI).
fn mpi4py_module(interpreter: &Path) -> Option<PathBuf> {
    let text = stdout_within(
        Command::new(interpreter).args([
            "-c",
            "import importlib.util as u; s = u.find_spec('mpi4py.MPI'); print(s.origin if s else '')",
        ]),
        ASK_TIMEOUT,
    )?;
    let origin = PathBuf::from(text.trim());
    origin.is_file().then_some(origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn python_words_that_name_mpi4py() {
        let none = Path::new("/nonexistent");
        assert!(imports_mpi4py(none, &words("-u -m mpi4py.bench ringtest")));
        let code = ["-c".to_string(), "from mpi4py import MPI".to_string()];
        assert!(imports_mpi4py(none, &code));
        assert!(!imports_mpi4py(none, &words("-m json.tool")));
        assert!(!imports_mpi4py(none, &words("")));
        let dir = std::env::temp_dir().join(format!("matchshim-detect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("ring.py");
        std::fs::write(
            &script,
            "from mpi4py import MPI\nprint(MPI.COMM_WORLD.rank)\n",
        )
        .unwrap();
        assert!(imports_mpi4py(none, &[script.display().to_string()]));
        std::fs::write(&script, "print(1)\n").unwrap();
        assert!(!imports_mpi4py(none, &[script.display().to_string()]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_script_names_its_interpreter_on_its_first_line() {
        let dir = std::env::temp_dir().join(format!("matchshim-shebang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("app");
        std::fs::write(&script, "#!/usr/bin/env sh\necho mpi4py\n").unwrap();
        assert!(python(&script, &[script.display().to_string()]).is_none());
        std::fs::write(&script, "#!/bin/sh -e\n").unwrap();
        assert!(python(&script, &[script.display().to_string()]).is_none());
        let command = words("python3 -m x");
        let named = python(Path::new("/usr/bin/python3"), &command);
        assert_eq!(named.map(|(_, args)| args.len()), Some(2));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
