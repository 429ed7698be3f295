//! Parquet files of the per-packet table ([`crate::packets`]), the per-flow rows
//! ([`crate::export::FlowRow`]) and the windows ([`crate::Window`]), written with arrow-rs:
//! what pandas, polars and DuckDB read without Horde. Column names are the CSV's; times are
//! `timestamp[ns, +00:00]` (UTC) in the packet table; Snappy-compressed, row groups of 64 Ki rows.

use std::io::Write;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::Serialize;

use crate::packets::{PacketRow, RowsError};
use crate::{Collected, Window};

/// Rows handed to the encoder at once (and the row group size).
const BATCH: usize = 65_536;

#[derive(Debug, thiserror::Error)]
pub enum ColumnarError {
    #[error(transparent)]
    Rows(#[from] RowsError),
    #[error("encoding Parquet: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("writing Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
}

/// The packet table's columns, in order.
pub fn packet_schema() -> SchemaRef {
    let ts = || DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into()));
    Arc::new(Schema::new(vec![
        Field::new("flow", DataType::UInt32, false),
        Field::new("direction", DataType::Utf8, false),
        Field::new("protocol", DataType::Utf8, true),
        Field::new("src_addr", DataType::Utf8, true),
        Field::new("src_port", DataType::UInt16, true),
        Field::new("dst_addr", DataType::Utf8, true),
        Field::new("dst_port", DataType::UInt16, true),
        Field::new("seq", DataType::UInt64, false),
        Field::new("size", DataType::UInt32, true),
        Field::new("scheduled_ns", ts(), true),
        Field::new("sent_ns", ts(), true),
        Field::new("arrival_ns", ts(), true),
        Field::new("delay_ms", DataType::Float64, true),
        Field::new("delay_kind", DataType::Utf8, true),
        Field::new("lost", DataType::Boolean, true),
        Field::new("duplicate", DataType::Boolean, false),
        Field::new("tos", DataType::UInt8, true),
        Field::new("ttl", DataType::UInt8, true),
    ]))
}

fn props() -> WriterProperties {
    WriterProperties::builder().set_compression(Compression::SNAPPY).set_max_row_group_row_count(Some(BATCH)).build()
}

/// Writes the packet table of `c` to `out`; returns the rows written.
pub fn write_packets<W: Write + Send>(c: &Collected, out: W) -> Result<u64, ColumnarError> {
    let schema = packet_schema();
    let mut w = ArrowWriter::try_new(out, schema.clone(), Some(props()))?;
    let mut decoder = arrow_json::ReaderBuilder::new(schema).with_batch_size(BATCH).build_decoder()?;
    let mut batch: Vec<PacketRow> = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    let mut put = |rows: &mut Vec<PacketRow>, w: &mut ArrowWriter<W>| -> Result<(), ColumnarError> {
        decoder.serialize(rows)?;
        if let Some(b) = decoder.flush()? {
            w.write(&b)?;
        }
        rows.clear();
        Ok(())
    };
    crate::packets::rows::<ColumnarError>(c, |r| {
        batch.push(r.clone());
        n += 1;
        if batch.len() == BATCH {
            put(&mut batch, &mut w)?;
        }
        Ok(())
    })?;
    put(&mut batch, &mut w)?;
    w.close()?;
    Ok(n)
}

/// Writes serialisable rows (the flow rows, the windows) as one Parquet table whose columns
/// come from the row type's JSON schema (its field names and types, not the values: a column
/// that is empty in one run has the same type as in the next).
pub fn write_rows<T: Serialize + schemars::JsonSchema, W: Write + Send>(rows: &[T], out: W) -> Result<u64, ColumnarError> {
    let schema = schema_of::<T>();
    let mut w = ArrowWriter::try_new(out, schema.clone(), Some(props()))?;
    let mut decoder = arrow_json::ReaderBuilder::new(schema).with_batch_size(BATCH).build_decoder()?;
    for chunk in rows.chunks(BATCH) {
        decoder.serialize(chunk)?;
        if let Some(b) = decoder.flush()? {
            w.write(&b)?;
        }
    }
    w.close()?;
    Ok(rows.len() as u64)
}

/// The windows table.
pub fn write_windows<W: Write + Send>(w: &[Window], out: W) -> Result<u64, ColumnarError> {
    write_rows(w, out)
}

/// An Arrow schema from a row type's JSON schema: integers by their format (uint8 … uint64,
/// int64), numbers as float64, strings, booleans; nullable where the type is `Option`. Fields
/// of other shapes (maps, nested objects) are left out.
pub fn schema_of<T: schemars::JsonSchema>() -> SchemaRef {
    use schemars::schema::{InstanceType, Schema as S, SingleOrVec};
    let root = schemars::schema_for!(T);
    let mut fields = Vec::new();
    let Some(obj) = root.schema.object.as_ref() else { return Arc::new(Schema::empty()) };
    for (name, s) in &obj.properties {
        let S::Object(o) = s else { continue };
        let types: Vec<InstanceType> = match &o.instance_type {
            Some(SingleOrVec::Single(t)) => vec![**t],
            Some(SingleOrVec::Vec(v)) => v.clone(),
            None => continue,
        };
        let nullable = types.contains(&InstanceType::Null) || !obj.required.contains(name);
        let Some(t) = types.iter().find(|t| **t != InstanceType::Null) else { continue };
        let dt = match (t, o.format.as_deref()) {
            (InstanceType::Integer, Some("uint8")) => DataType::UInt8,
            (InstanceType::Integer, Some("uint16")) => DataType::UInt16,
            (InstanceType::Integer, Some("uint32")) => DataType::UInt32,
            (InstanceType::Integer, Some("uint64" | "uint")) => DataType::UInt64,
            (InstanceType::Integer, _) => DataType::Int64,
            (InstanceType::Number, _) => DataType::Float64,
            (InstanceType::String, _) => DataType::Utf8,
            (InstanceType::Boolean, _) => DataType::Boolean,
            _ => continue,
        };
        fields.push(Field::new(name, dt, nullable));
    }
    Arc::new(Schema::new(fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{collect, LoadedLog};
    use horde_wire::{Record, RecordKind, Role};
    use parquet::file::reader::{FileReader, SerializedFileReader};

    #[test]
    fn packets_reach_parquet_with_their_types() {
        let tx: Vec<Record> =
            (0..5).map(|s| Record { flow: 1, size: 64, seq: s, t_a: 10 + s, t_b: 11 + s, kind: RecordKind::Sent, ..Default::default() }).collect();
        let rx: Vec<Record> = [0, 1, 3]
            .iter()
            .map(|&s| Record { flow: 1, size: 64, seq: s, t_a: 11 + s, t_b: 1011 + s, kind: RecordKind::Received, ..Default::default() })
            .collect();
        let logs = [LoadedLog { role: Role::Sender, records: tx, trailing_bytes: 0 }, LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 }];
        let path = std::env::temp_dir().join(format!("horde-columnar-{}.parquet", std::process::id()));
        assert_eq!(write_packets(&collect(&logs), std::fs::File::create(&path).unwrap()).unwrap(), 5);
        let r = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(r.metadata().file_metadata().num_rows(), 5);
        let schema = r.metadata().file_metadata().schema_descr();
        assert_eq!(schema.num_columns(), packet_schema().fields().len());
        assert_eq!(schema.column(9).name(), "scheduled_ns");
    }

    #[test]
    fn windows_schema_follows_the_type() {
        let s = schema_of::<Window>();
        let f = s.field_with_name("packets").unwrap();
        assert_eq!((f.data_type(), f.is_nullable()), (&DataType::UInt64, false));
        assert_eq!(s.field_with_name("delay_mean_ms").unwrap().data_type(), &DataType::Float64);
        assert!(s.field_with_name("lost").unwrap().is_nullable());
        let mut buf = Vec::new();
        let w = vec![Window { start_s: 0.0, flow: Some(1), packets: 3, ..Default::default() }];
        assert_eq!(write_windows(&w, &mut buf).unwrap(), 1);
    }
}
