//! Command-line front end of cornflakes-build.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Generate Cornflakes Rust types from proto3 schemas.
///
/// Writes one `<package>.rs` per proto package into the output directory;
/// include each in a module of the same name. Unsupported schema features
/// (proto2 syntax, groups, extensions) are reported with file and line.
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Args {
    /// Directory to search for imports (repeatable). Defaults to the
    /// directory of each schema.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    includes: Vec<PathBuf>,
    /// Where to write the generated files.
    #[arg(short, long, value_name = "DIR", default_value = ".")]
    out_dir: PathBuf,
    /// Print the generated code to stdout instead of writing files.
    #[arg(long)]
    stdout: bool,
    /// Wire format of the generated types: `cornflakes` (the Cornflakes
    /// format) or `protobuf` (standard proto3 bytes, byte-identical to
    /// prost's, with serialize-and-send; see docs/protobuf-wire.md).
    #[arg(long, value_name = "FORMAT", default_value = "cornflakes", value_parser = ["cornflakes", "protobuf"])]
    wire: String,
    /// `PATH=ATTRIBUTE`: add a Rust attribute to the types PATH matches
    /// (`.=#[derive(Hash)]`, `.acme.Order=#[must_use]`), as prost-build's
    /// `type_attribute` (repeatable; see Config::type_attribute).
    #[arg(long, value_name = "PATH=ATTRIBUTE", value_parser = path_and_attribute)]
    type_attribute: Vec<(String, String)>,
    /// As --type-attribute, for messages only.
    #[arg(long, value_name = "PATH=ATTRIBUTE", value_parser = path_and_attribute)]
    message_attribute: Vec<(String, String)>,
    /// As --type-attribute, for enums and oneofs only.
    #[arg(long, value_name = "PATH=ATTRIBUTE", value_parser = path_and_attribute)]
    enum_attribute: Vec<(String, String)>,
    /// Also write the schemas' FileDescriptorSet (imports and source info
    /// included) to this file, as protoc's --descriptor_set_out (relative
    /// paths are under --out-dir).
    #[arg(long, value_name = "FILE")]
    descriptor_set_out: Option<PathBuf>,
    /// Schemas to compile.
    #[arg(required = true, value_name = "PROTO")]
    protos: Vec<PathBuf>,
}

/// `PATH=ATTRIBUTE` split at the first `=`.
fn path_and_attribute(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((path, attribute)) if !path.is_empty() => Ok((path.to_owned(), attribute.to_owned())),
        _ => Err(format!("expected PATH=ATTRIBUTE (for example .=#[derive(Hash)]), got {arg:?}")),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut includes = args.includes.clone();
    if includes.is_empty() {
        for p in &args.protos {
            let dir = p.parent().map(|d| if d.as_os_str().is_empty() { PathBuf::from(".") } else { d.to_path_buf() });
            if let Some(dir) = dir {
                if !includes.contains(&dir) {
                    includes.push(dir);
                }
            }
        }
    }
    let mut config = cornflakes_build::Config::new();
    config.emit_rerun_if_changed(false).out_dir(&args.out_dir);
    if args.wire == "protobuf" {
        config.wire(cornflakes_build::Wire::Protobuf);
    }
    if let Some(path) = &args.descriptor_set_out {
        config.file_descriptor_set_path(path);
    }
    for (path, attribute) in &args.type_attribute {
        config.type_attribute(path, attribute);
    }
    for (path, attribute) in &args.message_attribute {
        config.message_attribute(path, attribute);
    }
    for (path, attribute) in &args.enum_attribute {
        config.enum_attribute(path, attribute);
    }
    let result = if args.stdout {
        config.generate(&args.protos, &includes).map(|files| {
            for f in files {
                println!("// ---- {} ----\n{}", f.name, f.code);
            }
        })
    } else {
        config.compile_protos(&args.protos, &includes).map(|paths| {
            for p in paths {
                eprintln!("wrote {}", p.display());
            }
        })
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
