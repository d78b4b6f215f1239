//! Passes on what the bindings crate found out about the MPI (its flavour and whether it has the
//! large-count `_c` functions and MPI-4's others, as cfgs) and an rpath to its library, so that
//! a program that links `-lmatchshim` before libmpi finds the same libmpi at run time; and
//! generates every exported entry point from `calls.list`: `entry_points.rs` (the C entry points
//! and their Fortran names, in `intercept`) and `next.rs` (each call passed to MPI, in `mpi`).

use std::collections::HashMap;
use std::env;
use std::fmt::Write;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=calls.list");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(mpich)");
    println!("cargo::rustc-check-cfg=cfg(openmpi)");
    println!("cargo::rustc-check-cfg=cfg(large_count)");
    println!("cargo::rustc-check-cfg=cfg(mpi4)");
    let flavor = env::var("DEP_MPI_FLAVOR").expect("matchshim-mpi says which MPI it bound");
    println!("cargo:rustc-cfg={flavor}");
    for cfg in ["large_count", "mpi4"] {
        if env::var(format!("DEP_MPI_{}", cfg.to_uppercase())).as_deref() == Ok("1") {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
    for dir in env::var("DEP_MPI_LINK_DIRS").unwrap_or_default().split(':') {
        if !dir.is_empty() {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,{dir}");
        }
    }

    let list = std::fs::read_to_string("calls.list").expect("calls.list");
    let calls = parse(&list).unwrap_or_else(|e| panic!("calls.list: {e}"));
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("entry_points.rs"), entry_points(&calls)).expect("write");
    std::fs::write(out.join("next.rs"), next(&calls)).expect("write");
}

/// One argument kind: its C type, that type in a large-count (`_c`) call, and whether a
/// Fortran entry point can convert it.
struct Kind {
    c: &'static str,
    large: &'static str,
    fortran: bool,
}

fn kinds() -> HashMap<&'static str, Kind> {
    let k = |c, fortran| Kind {
        c,
        large: c,
        fortran,
    };
    HashMap::from([
        ("Buf", k("*mut c_void", true)),
        ("CBuf", k("*const c_void", true)),
        (
            "Count",
            Kind {
                c: "c_int",
                large: "MPI_Count",
                fortran: true,
            },
        ),
        ("Int", k("c_int", true)),
        ("Logical", k("c_int", true)),
        ("Ints", k("*const c_int", true)),
        ("Weights", k("*const c_int", true)),
        ("Datatype", k("MPI_Datatype", true)),
        ("Datatypes", k("*const MPI_Datatype", true)),
        ("Op", k("MPI_Op", true)),
        ("Comm", k("MPI_Comm", true)),
        ("CommOut", k("*mut MPI_Comm", true)),
        ("CommInOut", k("*mut MPI_Comm", true)),
        ("Group", k("MPI_Group", true)),
        ("Info", k("MPI_Info", true)),
        ("Request", k("MPI_Request", true)),
        ("RequestOut", k("*mut MPI_Request", true)),
        ("RequestInOut", k("*mut MPI_Request", true)),
        ("Requests", k("*mut MPI_Request", true)),
        ("Status", k("*mut MPI_Status", true)),
        ("Statuses", k("*mut MPI_Status", true)),
        ("Flag", k("*mut c_int", true)),
        ("Index", k("*mut c_int", true)),
        ("IntOut", k("*mut c_int", true)),
        ("Indices", k("*mut c_int", true)),
        ("MessageOut", k("*mut MPI_Message", true)),
        ("Argc", k("*mut c_int", false)),
        ("Argv", k("*mut *mut *mut c_char", false)),
        // The tool information interface (MPI_T has no Fortran binding).
        ("Str", k("*const c_char", false)),
        ("StrOut", k("*mut c_char", false)),
        ("DatatypeOut", k("*mut MPI_Datatype", false)),
        ("EnumOut", k("*mut MPI_T_enum", false)),
        ("Session", k("MPI_T_pvar_session", false)),
        ("SessionInOut", k("*mut MPI_T_pvar_session", false)),
        ("PvarHandle", k("MPI_T_pvar_handle", false)),
        ("PvarHandleInOut", k("*mut MPI_T_pvar_handle", false)),
    ])
}

struct Arg {
    name: String,
    kind: String,
    /// The argument that gives an array's length.
    len: Option<String>,
}

#[derive(Default)]
struct Call {
    name: String,
    args: Vec<Arg>,
    does: String,
    shim: Option<String>,
    plain: Option<String>,
    /// On the plain path, instead of MPI's own call: MPI's call with what the shim adds to it.
    plain_mpi: Option<String>,
    /// The plain test only reads: it comes before the test of a call made from inside the shim.
    plain_first: bool,
    /// With `plain_first`, before the full path: `runtime::{around}_before` of the call's
    /// requests; where it gives a state, MPI's own call (or `plain_mpi`), then
    /// `runtime::{around}_after` with MPI's code, a reference to that state and what the call
    /// reports complete ([`around_done`]).
    around: Option<String>,
    /// At `MPI_THREAD_MULTIPLE`, instead of `plain`: a guard to hold while MPI has the call.
    threaded: Option<String>,
    native: Option<String>,
    raw: Option<String>,
    /// The handler is the nonblocking form's: it gets a null request.
    blocking: bool,
    large_count: bool,
    mpi4: bool,
    fortran_openmpi: bool,
    fortran_mpich_f08: bool,
    /// A function the Fortran entry points call instead, and their own arguments.
    fortran_via: Option<(String, Vec<Arg>)>,
}

/// `name: Kind, name: Kind[length], ...`
fn arguments(list: &str, kinds: &HashMap<&'static str, Kind>) -> Result<Vec<Arg>, String> {
    let mut args = Vec::new();
    for arg in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let (name, kind) = arg.split_once(':').ok_or("an argument without a kind")?;
        let kind = kind.trim();
        let (kind, len) = match kind.split_once('[') {
            Some((k, l)) => (k, Some(l.trim_end_matches(']').to_string())),
            None => (kind, None),
        };
        if !kinds.contains_key(kind) {
            return Err(format!("unknown kind {kind}"));
        }
        args.push(Arg {
            name: name.trim().to_string(),
            kind: kind.to_string(),
            len,
        });
    }
    Ok(args)
}

fn parse(list: &str) -> Result<Vec<Call>, String> {
    let kinds = kinds();
    let mut calls: Vec<Call> = Vec::new();
    for (number, line) in list.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {line}", number + 1);
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            let (name, rest) = text.split_once('(').ok_or_else(|| at("no argument list"))?;
            let inside = rest
                .strip_suffix(')')
                .ok_or_else(|| at("no closing parenthesis"))?;
            let args = arguments(inside, &kinds).map_err(|e| at(&e))?;
            calls.push(Call {
                name: name.to_string(),
                args,
                ..Call::default()
            });
            continue;
        }
        let call = calls
            .last_mut()
            .ok_or_else(|| at("an attribute before any call"))?;
        let (key, value) = match text.split_once(':') {
            Some((k, v)) => (k.trim(), v.trim().to_string()),
            None => (text, String::new()),
        };
        match key {
            "does" => call.does = value,
            "shim" => call.shim = Some(value),
            "plain" => call.plain = Some(value),
            "plain_mpi" => call.plain_mpi = Some(value),
            "threaded" => call.threaded = Some(value),
            "native" => call.native = Some(value),
            "raw" => call.raw = Some(value),
            "plain_first" => call.plain_first = true,
            "around" => call.around = Some(value),
            "large_count" => call.large_count = true,
            "blocking" => call.blocking = true,
            "mpi4" => call.mpi4 = true,
            "fortran" => {
                let (bindings, via) = match value.split_once(" via ") {
                    Some((b, v)) => (b, Some(v)),
                    None => (value.as_str(), None),
                };
                for word in bindings.split_whitespace() {
                    match word {
                        "openmpi" => call.fortran_openmpi = true,
                        "mpich-f08" => call.fortran_mpich_f08 = true,
                        other => return Err(at(&format!("unknown Fortran binding {other}"))),
                    }
                }
                if let Some(via) = via {
                    let (function, rest) = via.split_once('(').ok_or_else(|| at("via what"))?;
                    let inside = rest
                        .strip_suffix(')')
                        .ok_or_else(|| at("no closing parenthesis"))?;
                    let args = arguments(inside, &kinds).map_err(|e| at(&e))?;
                    call.fortran_via = Some((function.to_string(), args));
                }
            }
            other => return Err(at(&format!("unknown attribute {other}"))),
        }
    }
    for call in &calls {
        let fail = |what: &str| Err(format!("{}: {what}", call.name));
        if call.shim.is_some() == call.raw.is_some() {
            return fail("needs `shim` or `raw`, not both");
        }
        if call.does.is_empty() {
            return fail("says nothing of what the shim does (`does`)");
        }
        if call.plain_mpi.is_some() && call.plain.is_none() {
            return fail("`plain_mpi` needs `plain`");
        }
        if call.plain_first && (call.plain.is_none() || call.threaded.is_some()) {
            return fail("`plain_first` orders `plain` without `threaded`: one is wrong");
        }
        if call.around.is_some() && (!call.plain_first || around_requests(call).is_none()) {
            return fail("`around` goes with `plain_first` and requests (`Requests[count]` or `RequestInOut`)");
        }
        if call.threaded.is_some() && call.plain.is_none() {
            return fail("`threaded` replaces `plain` at MPI_THREAD_MULTIPLE: `plain` is missing");
        }
        let fortran = call.fortran_openmpi || call.fortran_mpich_f08;
        if fortran && call.fortran_via.is_none() {
            if let Some(arg) = call.args.iter().find(|a| !kinds[a.kind.as_str()].fortran) {
                return fail(&format!("no Fortran conversion for {}", arg.name));
            }
        }
        for arg in &call.args {
            if let Some(len) = &arg.len {
                if !call.args.iter().any(|a| &a.name == len) {
                    return fail(&format!("{}'s length {len} is no argument", arg.name));
                }
            }
        }
    }
    Ok(calls)
}

/// The cfg a call's entry points exist under, if any.
fn cfg(call: &Call, large: bool) -> Option<&'static str> {
    match (large, call.mpi4) {
        (false, false) => None,
        (false, true) => Some("mpi4"),
        (true, false) => Some("large_count"),
        (true, true) => Some("all(large_count, mpi4)"),
    }
}

fn params(call: &Call, large: bool) -> String {
    let kinds = kinds();
    call.args
        .iter()
        .map(|a| {
            let kind = &kinds[a.kind.as_str()];
            format!("{}: {}", a.name, if large { kind.large } else { kind.c })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The call's C argument types, as a function pointer type lists them.
fn types(call: &Call, large: bool) -> String {
    let kinds = kinds();
    call.args
        .iter()
        .map(|a| {
            let kind = &kinds[a.kind.as_str()];
            if large {
                kind.large
            } else {
                kind.c
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(call: &Call) -> String {
    call.args
        .iter()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The arguments as a handler takes them: counts as `MPI_Count`, and a null request for the
/// blocking form of a nonblocking call's handler.
fn handler_args(call: &Call) -> String {
    let mut args: Vec<String> = call
        .args
        .iter()
        .map(|a| match a.kind.as_str() {
            "Count" => format!("{} as Count", a.name),
            _ => a.name.clone(),
        })
        .collect();
    if call.blocking {
        args.push("std::ptr::null_mut()".into());
    }
    args.join(", ")
}

fn c_name(call: &Call, large: bool) -> String {
    if large {
        format!("{}_c", call.name)
    } else {
        call.name.clone()
    }
}

/// `|comm, request| MPI_Iname(...)` through MPI, for a call with `native`.
fn native_closure(call: &Call, native: &str, large: bool) -> String {
    let comm = call
        .args
        .iter()
        .find(|a| a.kind == "Comm")
        .map(|a| a.name.as_str())
        .unwrap_or("comm");
    let mut args: Vec<String> = call
        .args
        .iter()
        .filter(|a| a.kind != "RequestOut")
        .map(|a| {
            if a.name == comm {
                "native_comm".to_string()
            } else {
                a.name.clone()
            }
        })
        .collect();
    args.push("native_request".into());
    let native = if large {
        format!("{native}_c")
    } else {
        native.to_string()
    };
    format!(
        "|native_comm: MPI_Comm, native_request: *mut MPI_Request| {{\n                \
         // SAFETY: the caller's arguments, with a communicator and request of the shim's.\n                \
         unsafe {{ crate::mpi::next::{native}({}) }}\n            }}",
        args.join(", ")
    )
}

fn c_entry(out: &mut String, call: &Call, large: bool) {
    let name = c_name(call, large);
    let params = params(call, large);
    let args = names(call);
    if let Some(cfg) = cfg(call, large) {
        writeln!(out, "#[cfg({cfg})]").unwrap();
    }
    let many_args = if call.args.len() > 7 {
        "#[allow(clippy::too_many_arguments)] // MPI's own\n"
    } else {
        ""
    };
    let types = types(call, large);
    write!(
        out,
        "/// {does}. A tool's `{name}` loaded after the shim is called instead: it reaches the\n\
         /// shim through the profiling name.\n\
         #[no_mangle]\n{many_args}\
         pub unsafe extern \"C\" fn {name}({params}) -> c_int {{\n    \
         static BELOW: Below = Below::new(c\"{name}\");\n    \
         // Out of line, so that the call without a tool costs one load.\n    \
         #[cold]\n    \
         #[inline(never)]\n{many_args}    \
         unsafe fn looked_up({params}) -> c_int {{\n        \
         match BELOW.tool() {{\n            \
         // SAFETY: the tool's `{name}`, called as MPI's, with the caller's arguments.\n            \
         Some(tool) => BELOW.pass(tool, || unsafe {{\n                \
         std::mem::transmute::<*mut c_void, unsafe extern \"C\" fn({types}) -> c_int>(tool)({args})\n            \
         }}),\n            \
         // SAFETY: the caller's arguments, as MPI requires them.\n            \
         None => unsafe {{ shim_{name}({args}) }},\n        \
         }}\n    \
         }}\n    \
         if BELOW.absent() {{\n        \
         // SAFETY: the caller's arguments, as MPI requires them.\n        \
         return unsafe {{ {profiled}{name}({args}) }};\n    \
         }}\n    \
         // SAFETY: as above.\n    \
         unsafe {{ looked_up({args}) }}\n}}\n\n",
        does = call.does,
        profiled = if call.plain.is_some() { "profiled_" } else { "shim_" },
    )
    .unwrap();
    if let Some(cfg) = cfg(call, large) {
        writeln!(out, "#[cfg({cfg})]").unwrap();
    }
    write!(
        out,
        "/// {name} at the profiling level: what the shim does with it, for the program or a tool.\n\
         #[export_name = \"P{name}\"]\n{many_args}\
         pub unsafe extern \"C\" fn shim_{name}({params}) -> c_int {{\n"
    )
    .unwrap();
    if call.plain.is_some() {
        let cfg = cfg(call, large).map_or(String::new(), |c| format!("#[cfg({c})]\n"));
        write!(
            out,
            "    // SAFETY: the caller's arguments, as MPI requires them.\n    \
             unsafe {{ profiled_{name}({args}) }}\n}}\n\n{cfg}\
             /// `P{name}`'s body, inlined into `{name}` as well: its plain path makes no call\n\
             /// but MPI's.\n\
             #[inline(always)]\n{many_args}\
             unsafe fn profiled_{name}({params}) -> c_int {{\n"
        )
        .unwrap();
    }
    // With a plain path, `checked` notes it: the plain path then makes no call but MPI's.
    if call.plain.is_none() {
        out.push_str("    crate::mpi::reached();\n");
    }
    if let Some(raw) = &call.raw {
        writeln!(
            out,
            "    // SAFETY: the caller's arguments, as MPI requires them.\n    \
             unsafe {{ {raw}({args}) }}\n}}\n"
        )
        .unwrap();
        return;
    }
    let shim = call.shim.as_ref().expect("checked in parse");
    let mut handler_call = format!("{shim}(rt, {})", handler_args(call));
    if let Some(native) = &call.native {
        handler_call = format!(
            "{shim}(rt, {}, {})",
            handler_args(call),
            native_closure(call, native, large)
        );
    }
    let many = if call.args.len() + 1 > 7 {
        "    #[allow(clippy::too_many_arguments)]\n"
    } else {
        ""
    };
    let comma = if call.args.is_empty() { "" } else { ", " };
    write!(
        out,
        "    // Out of line, so that the plain path saves no registers for it.\n    \
         #[inline(never)]\n{many}    \
         unsafe fn shim_side({params}{comma}rt: &'static Runtime) -> c_int {{\n        \
         // SAFETY: the caller's arguments, as MPI requires them.\n        \
         match guarded(\"{name}\", rt, |rt| unsafe {{ {handler_call} }}) {{\n            \
         Ok(code) | Err(Error::Raised(code)) => code,\n            \
         // SAFETY: as above.\n            \
         Err(Error::Invalid) => unsafe {{ next::{name}({args}) }},\n            \
         // MPI runs the call; receives the shim lent it for the call come back after.\n            \
         Err(Error::ToMpi) => {{\n                \
         // SAFETY: as above.\n                \
         let code = unsafe {{ next::{name}({args}) }};\n                \
         let _ = guarded(\"{name}\", rt, |rt| {{\n                    \
         rt.step_back();\n                    \
         Ok(code)\n                \
         }});\n                \
         code\n            \
         }}\n        \
         }}\n    }}\n"
    )
    .unwrap();
    let plain_mpi = call.plain_mpi.as_ref().map_or_else(
        || format!("next::{name}"),
        |f| format!("crate::intercept::{f}"),
    );
    // At MPI_THREAD_MULTIPLE one look at the thread's state and the guard held until MPI
    // returns; below it the serial test of a call re-entered, then the plain test.
    // A call's threaded and serial parts take `checked`'s own arguments and read the runtime
    // again. Out of line, `checked` jumps to them; with an argument on the stack it would call
    // them, and inline they save that call's frame.
    let (inline, why) = if call.args.len() > 6 {
        (
            "always",
            "a call to it would cost a frame: an argument goes on the stack",
        )
    } else {
        (
            "never",
            "`checked` jumps to it, and the plain path pays nothing for its work",
        )
    };
    // A function of the call's own arguments that reads the runtime first (after `before`),
    // its call passed to MPI as it is without one.
    let opening = |attributes: &str, function: &str, before: &str, get_runtime: &str| {
        format!(
            "{attributes}{many}    \
             unsafe extern \"C\" fn {function}({params}) -> c_int {{\n        \
             {before}let Some(rt) = {get_runtime}() else {{\n            \
             // SAFETY: the caller's arguments, as MPI requires them.\n            \
             return unsafe {{ next::{name}({args}) }};\n        \
             }};\n        "
        )
    };
    let part = format!("    // Inline {inline}: {why}.\n    #[inline({inline})]\n");
    let checked = "    #[inline(never)]\n";
    let reached = "crate::mpi::reached();\n        ";
    if let Some(threaded) = &call.threaded {
        write!(
            out,
            "{}\
             thread::with_local_inlined(|local| {{\n            \
             if local.in_call().is_some() {{\n                \
             // SAFETY: the caller's arguments, as MPI requires them.\n                \
             return unsafe {{ next::{name}({args}) }};\n            \
             }}\n            \
             // SAFETY: a test of the caller's arguments, valid as MPI requires them.\n            \
             if let Some(_held) = unsafe {{ {threaded} }} {{\n                \
             // SAFETY: the caller's arguments, as MPI requires them.\n                \
             return unsafe {{ {plain_mpi}({args}) }};\n            \
             }}\n            \
             // SAFETY: as above.\n            \
             unsafe {{ shim_side({args}{comma}rt) }}\n        \
             }})\n    \
             }}\n",
            opening(&part, "threaded", "", "installed")
        )
        .unwrap();
    }
    match &call.plain {
        None => write!(
            out,
            "    match runtime() {{\n        \
             // SAFETY: the caller's arguments, as MPI requires them.\n        \
             Some(rt) => unsafe {{ shim_side({args}{comma}rt) }},\n        \
             // SAFETY: as above.\n        \
             None => unsafe {{ next::{name}({args}) }},\n    \
             }}\n}}\n\n"
        )
        .unwrap(),
        Some(plain) => {
            let plain_test = format!(
                "// SAFETY: a test of the caller's arguments, valid as MPI requires them.\n        \
                 if unsafe {{ {plain} }} {{\n            \
                 // SAFETY: as above.\n            \
                 return unsafe {{ {plain_mpi}({args}) }};\n        \
                 }}\n        "
            );
            let to_shim = format!(
                "// SAFETY: as above.\n        \
                 unsafe {{ shim_side({args}{comma}rt) }}\n    \
                 }}\n"
            );
            if call.threaded.is_some() {
                write!(
                    out,
                    "{}\
                     // SAFETY: below MPI_THREAD_MULTIPLE (the caller checked).\n        \
                     if unsafe {{ thread::in_call_serial() }}.is_some() {{\n            \
                     // SAFETY: the caller's arguments, as MPI requires them.\n            \
                     return unsafe {{ next::{name}({args}) }};\n        \
                     }}\n        \
                     {plain_test}{to_shim}{}\
                     if rt.multiple {{\n            \
                     // SAFETY: the caller's arguments, as MPI requires them.\n            \
                     return unsafe {{ threaded({args}) }};\n        \
                     }}\n        \
                     // SAFETY: as above.\n        \
                     unsafe {{ serial({args}) }}\n    \
                     }}\n",
                    opening(&part, "serial", "", "installed"),
                    opening(checked, "checked", reached, "started_runtime"),
                )
                .unwrap();
            } else if call.plain_first {
                let around = match (&call.around, around_requests(call)) {
                    (Some(around), Some((count, requests))) => {
                        let done = around_done(call);
                        format!(
                        "// SAFETY: the caller's arguments, as MPI requires them.\n        \
                         let around =\n            \
                         unsafe {{ crate::runtime::{around}_before(rt, {count}, {requests}) }};\n        \
                         if let Some(state) = &around {{\n            \
                         // SAFETY: as above.\n            \
                         let code = unsafe {{ {plain_mpi}({args}) }};\n            \
                         // SAFETY: the array MPI's call had.\n            \
                         unsafe {{ crate::runtime::{around}_after(rt, {count}, {requests}, code, state, {done}) }};\n            \
                         return code;\n        \
                         }}\n        "
                        )
                    }
                    _ => String::new(),
                };
                // A call made from inside the shim goes to MPI as the plain path does: that
                // test (a thread-local at MPI_THREAD_MULTIPLE) waits for the plain test to fail,
                // in a part of its own, so that `checked` saves no registers and jumps to MPI.
                write!(
                    out,
                    "{}\
                     if thread::in_call(rt.multiple).is_some() {{\n            \
                     // SAFETY: as above.\n            \
                     return unsafe {{ next::{name}({args}) }};\n        \
                     }}\n        \
                     {around}{to_shim}{}{plain_test}\
                     // SAFETY: as above.\n        \
                     unsafe {{ unplain({args}) }}\n    \
                     }}\n",
                    opening(
                        "    // Out of line: `checked` jumps to it.\n    #[inline(never)]\n",
                        "unplain",
                        reached,
                        "started_runtime"
                    ),
                    opening(
                        checked,
                        "checked",
                        &format!(
                            "// A tool is probed: `unplain` notes that the call reached the shim.\n        \
                             if crate::mpi::probing() {{\n            \
                             // SAFETY: the caller's arguments, as MPI requires them.\n            \
                             return unsafe {{ unplain({args}) }};\n        \
                             }}\n        "
                        ),
                        "started_runtime"
                    ),
                )
                .unwrap();
            } else {
                write!(
                    out,
                    "{}{plain_test}{to_shim}",
                    opening(checked, "checked", reached, "runtime"),
                )
                .unwrap();
            }
            // An `around` call's plain test reads the registry's filter and whether anything
            // needs the shim's progress, which the serial gate answered: where it failed below
            // MPI_THREAD_MULTIPLE, `checked` would fail it again, so `unplain` follows.
            let failed = if call.around.is_some() {
                format!(
                    "// SAFETY: as above.\n        \
                     Some(_) => unsafe {{ unplain({args}) }},\n        "
                )
            } else {
                String::new()
            };
            write!(
                out,
                "    // The plain path below MPI_THREAD_MULTIPLE makes no call before MPI's own.\n    \
                 match serial_runtime() {{\n        \
                 // SAFETY: a test of the caller's arguments, valid as MPI requires them.\n        \
                 Some(rt) if unsafe {{ {plain} }} => {{\n            \
                 // SAFETY: the caller's arguments, as MPI requires them.\n            \
                 unsafe {{ {plain_mpi}({args}) }}\n        \
                 }}\n        \
                 {failed}\
                 // SAFETY: as above.\n        \
                 _ => unsafe {{ checked({args}) }},\n    \
                 }}\n}}\n\n"
            )
            .unwrap();
        }
    }
}

/// A call's requests for `around`: their count (an expression) and the argument that points
/// to them.
fn around_requests(call: &Call) -> Option<(String, String)> {
    call.args
        .iter()
        .find_map(|a| match (a.kind.as_str(), &a.len) {
            ("Requests", Some(len)) => Some((len.clone(), a.name.clone())),
            ("RequestInOut", None) => Some(("1".to_string(), a.name.clone())),
            _ => None,
        })
}

/// What a call with `around` reports it completed, for its `_after`: a `complete::Done` of
/// its index, its count and indices, or its flag; else every request it was given.
fn around_done(call: &Call) -> String {
    let named = |kind: &str| {
        call.args
            .iter()
            .find(|a| a.kind == kind)
            .map(|a| a.name.clone())
    };
    let done = "crate::runtime::complete::Done";
    match (
        named("Index"),
        named("IntOut"),
        named("Indices"),
        named("Flag"),
    ) {
        (Some(index), ..) => format!("{done}::Index({index})"),
        (None, Some(outcount), Some(indices), _) => format!("{done}::Some({outcount}, {indices})"),
        (None, _, _, Some(flag)) => format!("{done}::Flag({flag})"),
        _ => format!("{done}::All"),
    }
}

/// Open MPI's five Fortran names of a call, and MPICH's `use mpi_f08` one.
fn fortran_names(call: &Call) -> Vec<(&'static str, String)> {
    let lower = call.name.to_lowercase();
    let mut names = Vec::new();
    if call.fortran_openmpi {
        for name in [
            format!("{lower}_"),
            format!("{lower}__"),
            lower.clone(),
            call.name.to_uppercase(),
            format!("{lower}_f08_"),
        ] {
            names.push(("openmpi", name));
        }
    }
    if call.fortran_mpich_f08 {
        names.push(("mpich", format!("{lower}_f08_")));
    }
    names
}

/// The length of array argument `arg`, from the Fortran arguments.
fn fortran_len(call: &Call, arg: &Arg) -> String {
    match &arg.len {
        None => "0".into(),
        Some(len) => {
            let of = call.args.iter().find(|a| &a.name == len).expect("checked");
            if of.kind == "Comm" {
                format!("fortran::ranks_of({len})")
            } else {
                format!("(*{len}).max(0) as usize")
            }
        }
    }
}

fn fortran_entry(out: &mut String, call: &Call, cfg_flavor: &str, name: &str) {
    if let Some(cfg) = cfg(call, false) {
        writeln!(out, "#[cfg(all({cfg_flavor}, {cfg}))]").unwrap();
    } else {
        writeln!(out, "#[cfg({cfg_flavor})]").unwrap();
    }
    writeln!(out, "#[no_mangle]").unwrap();
    if call.args.len() + 1 > 7 {
        writeln!(out, "#[allow(clippy::too_many_arguments)] // MPI's own").unwrap();
    }
    let args = match &call.fortran_via {
        Some((_, args)) => args,
        None => &call.args,
    };
    let below = if call.fortran_via.is_some() {
        // The `via` function calls the next definition of the name itself.
        String::new()
    } else {
        let types: Vec<String> = args
            .iter()
            .map(|a| format!("<fortran::{} as fortran::Arg>::F", a.kind))
            .chain(["*mut Fint".to_string()])
            .collect();
        let names: Vec<&str> = args
            .iter()
            .map(|a| a.name.as_str())
            .chain(["ierr"])
            .collect();
        format!(
            "    static BELOW: Below = Below::new(c\"{name}\");\n    \
             if let Some(tool) = BELOW.tool() {{\n        \
             // SAFETY: the tool's `{name}`, called as MPI's, with the caller's arguments.\n        \
             return BELOW.pass(tool, || unsafe {{\n            \
             std::mem::transmute::<*mut c_void, unsafe extern \"C\" fn({})>(tool)({})\n        \
             }});\n    \
             }}\n",
            types.join(", "),
            names.join(", ")
        )
    };
    let params: Vec<String> = args
        .iter()
        .map(|a| format!("{}: <fortran::{} as fortran::Arg>::F", a.name, a.kind))
        .collect();
    let comma = if params.is_empty() { "" } else { ", " };
    writeln!(
        out,
        "pub unsafe extern \"C\" fn {name}({}{comma}ierr: *mut Fint) {{",
        params.join(", ")
    )
    .unwrap();
    out.push_str(&below);
    if let Some((via, args)) = &call.fortran_via {
        let names: Vec<&str> = args.iter().map(|a| a.name.as_str()).collect();
        let comma = if names.is_empty() { "" } else { ", " };
        writeln!(
            out,
            "    // SAFETY: the Fortran caller's arguments, as MPI requires them.\n    \
             let code = unsafe {{ {via}(c\"{name}\"{comma}{}) }};\n    \
             // SAFETY: as above.\n    \
             unsafe {{ fortran::set_ierr(ierr, code) }};\n}}\n",
            names.join(", ")
        )
        .unwrap();
        return;
    }
    writeln!(
        out,
        "    // SAFETY: the Fortran caller's arguments, as MPI requires them; each is converted\n    \
         // in, handed to the C entry point and converted back.\n    \
         unsafe {{"
    )
    .unwrap();
    for a in &call.args {
        writeln!(
            out,
            "        let mut held_{0} = <fortran::{1} as fortran::Arg>::enter({0}, {2});",
            a.name,
            a.kind,
            fortran_len(call, a)
        )
        .unwrap();
    }
    let c_args: Vec<String> = call
        .args
        .iter()
        .map(|a| {
            format!(
                "<fortran::{} as fortran::Arg>::c(&mut held_{})",
                a.kind, a.name
            )
        })
        .collect();
    writeln!(
        out,
        "        let code = shim_{}({});",
        call.name,
        c_args.join(", ")
    )
    .unwrap();
    // Lengths are read again: an output count (`outcount`) is known only now.
    for a in &call.args {
        writeln!(
            out,
            "        <fortran::{} as fortran::Arg>::leave(held_{}, {});",
            a.kind,
            a.name,
            fortran_len(call, a)
        )
        .unwrap();
    }
    writeln!(out, "        fortran::set_ierr(ierr, code);\n    }}\n}}\n").unwrap();
}

fn entry_points(calls: &[Call]) -> String {
    let mut out = String::from(
        "// Generated by build.rs from calls.list: every exported MPI entry point.\n\n",
    );
    for call in calls {
        c_entry(&mut out, call, false);
        if call.large_count {
            c_entry(&mut out, call, true);
        }
        for (flavor, name) in fortran_names(call) {
            fortran_entry(&mut out, call, flavor, &name);
        }
    }
    out
}

fn next(calls: &[Call]) -> String {
    let mut out = String::from(
        "// Generated by build.rs from calls.list: each exported call as MPI makes it.\n\n",
    );
    let mut natives: Vec<(String, &Call)> = Vec::new();
    for call in calls {
        let emit = |out: &mut String, large: bool| {
            let name = c_name(call, large);
            if let Some(cfg) = cfg(call, large) {
                writeln!(out, "#[cfg({cfg})]").unwrap();
            }
            let many = if call.args.len() > 7 {
                "#[allow(clippy::too_many_arguments)] // MPI's own\n"
            } else {
                ""
            };
            let types = types(call, large);
            write!(
                out,
                "/// MPI's own `{name}`: the MPI library's `P{name}`, never a tool's or the shim's.\n\
                 ///\n/// # Safety\n/// The arguments are valid as MPI requires them.\n\
                 #[inline(always)]\n{many}pub unsafe fn {name}({params}) -> c_int {{\n    \
                 static OWN: Own = Own::new(c\"P{name}\");\n    \
                 // Out of line, so that the call once known is MPI's alone.\n    \
                 #[cold]\n    \
                 #[inline(never)]\n{many}    \
                 unsafe extern \"C\" fn looked_up({params}) -> c_int {{\n        \
                 // SAFETY: MPI's `P{name}`, as the caller promises.\n        \
                 unsafe {{\n            \
                 std::mem::transmute::<*mut c_void, unsafe extern \"C\" fn({types}) -> c_int>(OWN.look_up())({args})\n        \
                 }}\n    \
                 }}\n    \
                 match OWN.known() {{\n        \
                 // SAFETY: as above.\n        \
                 Some(at) => unsafe {{\n            \
                 std::mem::transmute::<*mut c_void, unsafe extern \"C\" fn({types}) -> c_int>(at)({args})\n        \
                 }},\n        \
                 // SAFETY: as above.\n        \
                 None => unsafe {{ looked_up({args}) }},\n    \
                 }}\n}}\n\n",
                params = params(call, large),
                args = names(call)
            )
            .unwrap();
        };
        emit(&mut out, false);
        if call.large_count {
            emit(&mut out, true);
        }
        if let Some(native) = &call.native {
            if !calls.iter().any(|c| &c.name == native) && !natives.iter().any(|(n, _)| n == native)
            {
                natives.push((native.clone(), call));
            }
        }
    }
    // Every profiling name the shim exports, for the check of what else defines them.
    let profiled: Vec<String> = calls
        .iter()
        .flat_map(|c| {
            let large = c.large_count.then(|| format!("c\"P{}_c\"", c.name));
            std::iter::once(format!("c\"P{}\"", c.name)).chain(large)
        })
        .collect();
    writeln!(
        out,
        "/// The profiling names the shim exports (some absent from an MPI without the call).\n\
         pub const PROFILED: &[&std::ffi::CStr] = &[{}];\n",
        profiled.join(", ")
    )
    .unwrap();
    // The nonblocking forms of blocking calls that are not themselves exported (sends).
    for (native, call) in natives {
        for large in [false, true] {
            if large && !call.large_count {
                continue;
            }
            let name = if large {
                format!("{native}_c")
            } else {
                native.clone()
            };
            if let Some(cfg) = cfg(call, large) {
                writeln!(out, "#[cfg({cfg})]").unwrap();
            }
            write!(
                out,
                "/// MPI's own `{name}`.\n///\n/// # Safety\n/// The arguments are valid as MPI \
                 requires them.\n#[inline(always)]\npub unsafe fn {name}({}, request: *mut \
                 MPI_Request) -> c_int {{\n    // SAFETY: as the caller promises.\n    unsafe {{ \
                 P{name}({}, request) }}\n}}\n\n",
                params(call, large),
                names(call)
            )
            .unwrap();
        }
    }
    out
}
