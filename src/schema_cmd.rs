//! `rocgate schema DOCUMENT`: the JSON Schema of each JSON document rocgate
//! writes, generated from the very types that write it (schemars reads
//! their serde attributes), so the schema cannot drift from the output.
//! The tests validate every document they produce against it with a real
//! validator (Python's `jsonschema`).

use crate::cli::{SchemaArgs, SchemaDocument};
use crate::error::{Error, Result};
use crate::output::Output;
use clap::ValueEnum;
use rocgate::exit::Exit;
use rocgate_harness::CheckResult;
use rocgate_harness::document::Document;
use schemars::generate::SchemaSettings;

/// Prints one schema, or writes them all into a directory.
pub fn run(args: &SchemaArgs) -> Result<Exit> {
    match (&args.out, args.document) {
        (None, Some(document)) => Output::Stdout.json(&schema(document)?)?,
        (None, None) => {
            return Err(Error::usage(
                "name a document (`rocgate schema run`) or a directory (`--out DIR`)",
            ));
        }
        (Some(dir), _) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::node_io(format!("failed to create {}: {e}", dir.display())))?;
            for doc in SchemaDocument::value_variants() {
                let name = doc
                    .to_possible_value()
                    .map_or_else(String::new, |v| v.get_name().to_string());
                Output::File(dir.join(format!("{name}.schema.json"))).json(&schema(*doc)?)?;
            }
        }
    }
    Ok(Exit::Pass)
}

/// `document`'s schema as pretty JSON: what rocgate writes (the
/// serialising side of each type, so a field left out when empty is not
/// required).
fn schema(document: SchemaDocument) -> Result<String> {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let schema = match document {
        SchemaDocument::Run => {
            generator.into_root_schema_for::<Document<CheckResult, rocgate::decision::Decision>>()
        }
        SchemaDocument::Doctor => {
            generator.into_root_schema_for::<crate::doctor_cmd::DoctorJson<'static>>()
        }
        SchemaDocument::Fleet => {
            generator.into_root_schema_for::<rocgate_harness::fleet::FleetJson<'static>>()
        }
        SchemaDocument::Inventory => {
            generator.into_root_schema_for::<rocgate::inventory::Inventory>()
        }
        SchemaDocument::Matrix => {
            generator.into_root_schema_for::<crate::matrix_cmd::MatrixReport<'static>>()
        }
        SchemaDocument::Codes => {
            generator.into_root_schema_for::<Vec<rocgate_suites::findings::Code>>()
        }
    };
    let name = document
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string());
    serde_json::to_string_pretty(&schema)
        .map_err(|e| Error::internal(format!("failed to encode the {name} schema: {e}")))
}
