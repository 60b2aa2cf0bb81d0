use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The generator's golden schema: compiling it here proves the golden
    // output builds, and the tests exercise it.
    cornflakes_build::compile_protos(
        &["../cornflakes-build/tests/golden/example.proto"],
        &["../cornflakes-build/tests/golden"],
    )?;
    cornflakes_build::compile_protos(&["proto/wide.proto"], &["proto"])?;
    readme_example()
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
