use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The generator's golden schema: compiling it here proves the golden
    // output builds, and the tests exercise it.
    cornflakes_build::compile_protos(
        &["../cornflakes-build/tests/golden/example.proto"],
        &["../cornflakes-build/tests/golden"],
    )?;
    cornflakes_build::compile_protos(&["proto/wide.proto"], &["proto"])?;
    // One schema before and after a change (tests/evolution.rs).
    cornflakes_build::compile_protos(&["proto/evolution/v1.proto", "proto/evolution/v2.proto"], &["proto"])?;
    // The protobuf-wire interop schema, generated with `Wire::Protobuf`.
    cornflakes_build::Config::new()
        .wire(cornflakes_build::Wire::Protobuf)
        .compile_protos(&["proto/protowire/pwtest.proto"], &["proto/protowire"])?;
    // Well-known types on the protobuf wire, from the runtime's protowire
    // module (no extern path to set).
    cornflakes_build::Config::new()
        .wire(cornflakes_build::Wire::Protobuf)
        .compile_protos(&["proto/protowire/events.proto"], &["proto/protowire"])?;
    corpus()?;
    readme_example()
}

/// The schema corpus (`proto/corpus`): generated with test samples into
/// `OUT_DIR/corpus`, plus `corpus.rs`, which nests one module per package
/// and lists every message for `tests/corpus.rs`.
fn corpus() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from("proto/corpus");
    let mut protos = Vec::new();
    for entry in walk(&dir)? {
        if entry.extension().is_some_and(|e| e == "proto") {
            protos.push(entry);
        }
    }
    protos.sort();
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("corpus");
    let mut config = cornflakes_build::Config::new();
    // The module tree (`mod.rs`) is the generator's `include_file`.
    config.out_dir(&out).test_samples(true).include_file("mod.rs");
    // Attributes as prost-build takes them (tests/attributes.rs): a derive on
    // one enum by its full name, and a marker on every type of a package.
    config
        .enum_attribute(".acme.maps.Tier", "#[derive(serde::Serialize)]")
        .type_attribute(".acme.payments", "#[doc(alias = \"payments_type\")]");
    let files = config.generate(&protos, &[&dir])?;
    config.compile_protos(&protos, &[&dir])?;

    let mut list = String::from("macro_rules! for_each_corpus_message { ($m:ident) => {\n");
    for f in &files {
        let segs: Vec<String> = f.package.split('.').map(escape).collect();
        for m in &f.messages {
            list.push_str(&format!("$m!(crate::corpus::{}::{});\n", segs.join("::"), m));
        }
    }
    list.push_str("}}\n");
    std::fs::write(out.join("list.rs"), list)?;
    Ok(())
}

fn escape(seg: &str) -> String {
    match seg {
        "type" | "async" | "mod" | "fn" | "impl" | "move" | "ref" | "match" | "use" | "where" => format!("r#{seg}"),
        _ => seg.to_owned(),
    }
}

fn walk(dir: &std::path::Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(walk(&path)?);
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

/// Extracts the README's usage example (its `proto` block and the `rust`
/// block that includes the generated `kv.rs`), generates the schema into
/// OUT_DIR and wraps the code in a function that `tests/readme.rs` runs.
fn readme_example() -> Result<(), Box<dyn std::error::Error>> {
    let readme_path = "../../README.md";
    println!("cargo:rerun-if-changed={readme_path}");
    let readme = std::fs::read_to_string(readme_path)?;
    let blocks = fenced_blocks(&readme);
    let proto = blocks.iter().find(|(lang, _)| lang == "proto").ok_or("README.md has no ```proto block")?;
    let code = blocks
        .iter()
        .find(|(lang, body)| lang == "rust" && body.contains("/kv.rs\""))
        .ok_or("README.md has no ```rust block that includes kv.rs")?;

    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let proto_dir = out.join("readme-proto");
    std::fs::create_dir_all(&proto_dir)?;
    std::fs::write(proto_dir.join("kv.proto"), &proto.1)?;
    cornflakes_build::Config::new()
        .emit_rerun_if_changed(false)
        .out_dir(&out)
        .compile_protos(&[proto_dir.join("kv.proto")], &[&proto_dir])?;
    let wrapped = format!(
        "// Extracted from README.md by build.rs: edit the README, not this.\n\
         #[allow(unused_variables, unused_mut, dead_code, clippy::all)]\n\
         fn readme_example() -> Result<(), Box<dyn std::error::Error>> {{\n{}\nOk(())\n}}\n",
        code.1
    );
    std::fs::write(out.join("readme_example.rs"), wrapped)?;
    Ok(())
}

/// The fenced code blocks of a Markdown text: (language, body).
fn fenced_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start().strip_prefix("```")) {
            (None, Some(lang)) => current = Some((lang.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}
