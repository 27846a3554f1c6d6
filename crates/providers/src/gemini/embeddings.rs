//! Gemini's embeddings: `models/M:batchEmbedContents`, one request per
//! input text (`outputDimensionality` from the client's `dimensions`), its
//! `embeddings[].values` made into OpenAI's `data` array ([`data`]: floats
//! as sent, or base64 of little-endian `f32`s when the client asked for
//! `encoding_format: "base64"`), its input tokens from `usageMetadata`
//! when it reports them (the Gemini API does not, and the attempt's usage
//! is then unknown). Vertex AI's `:predict` is the vertex module's.

use super::model_name;
use crate::adapter::ModelPath;
use crate::embeddings::EmbeddingsFormat;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use callai_engine::{FailureKind, ProviderFailure, ProviderReply};
use callai_wire::Embedding;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// Gemini's `batchEmbedContents`.
#[derive(Debug)]
pub struct GeminiEmbeddings;

#[derive(Serialize)]
struct Batch<'a> {
    requests: Vec<One<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct One<'a> {
    model: &'a str,
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

#[derive(Serialize)]
struct Content<'a> {
    parts: [Text<'a>; 1],
}

#[derive(Serialize)]
struct Text<'a> {
    text: &'a str,
}

/// A `batchEmbedContents` answer.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    #[serde(default)]
    embeddings: Vec<Values>,
    #[serde(default)]
    usage_metadata: Option<Usage>,
}

#[derive(Deserialize)]
struct Values {
    values: Box<RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(default)]
    prompt_token_count: Option<u32>,
}

/// One entry of OpenAI's `data`.
#[derive(Serialize)]
struct Item<'a> {
    object: &'static str,
    index: usize,
    embedding: Vector<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Vector<'a> {
    Floats(&'a RawValue),
    Base64(String),
}

/// The input's texts: a string, or a list of strings (Gemini takes no
/// token ids).
pub(crate) fn texts(input: &Value) -> Result<Vec<&str>, String> {
    let refused = || "Gemini embeds text; token ids cannot be sent to it".to_owned();
    match input {
        Value::String(s) => Ok(vec![s]),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().ok_or_else(refused))
            .collect(),
        _ => Err(refused()),
    }
}

impl EmbeddingsFormat for GeminiEmbeddings {
    type Answer = Answer;

    fn path(model: &str) -> Result<ModelPath, String> {
        Ok((
            format!("/models/{}:batchEmbedContents", model_name(model)?),
            &[],
        ))
    }

    fn body(model: &str, embedding: &Embedding) -> Result<Vec<u8>, String> {
        let model = format!("models/{}", model_name(model)?);
        let requests = texts(&embedding.input)?
            .into_iter()
            .map(|text| One {
                model: &model,
                content: Content {
                    parts: [Text { text }],
                },
                output_dimensionality: embedding.dimensions,
            })
            .collect();
        Ok(serde_json::to_vec(&Batch { requests }).expect("a batch always serialises"))
    }

    fn reply(answer: Answer, embedding: &Embedding) -> Result<ProviderReply, ProviderFailure> {
        let data = data(answer.embeddings.iter().map(|e| &*e.values), embedding)?;
        let input = answer.usage_metadata.and_then(|u| u.prompt_token_count);
        Ok(crate::embeddings::embedded(data, input, None))
    }
}

/// OpenAI's `data` array, as JSON, of the vectors `values` (each a JSON
/// array of numbers) answered to `embedding`: floats as sent, or base64
/// of little-endian `f32`s when the client asked for them; a transient
/// failure when there are not as many as its inputs.
pub(crate) fn data<'a>(
    values: impl ExactSizeIterator<Item = &'a RawValue>,
    embedding: &Embedding,
) -> Result<String, ProviderFailure> {
    let asked = texts(&embedding.input).map_or(0, |t| t.len());
    let wrong = |why: String| ProviderFailure::new(FailureKind::Transient, None, why);
    if values.len() != asked {
        return Err(wrong(format!(
            "Google answered {} embeddings for {asked} inputs",
            values.len()
        )));
    }
    let base64 = embedding.encoding_format.as_deref() == Some("base64");
    let mut data = Vec::with_capacity(asked);
    for (index, values) in values.enumerate() {
        let embedding = if base64 {
            let floats: Vec<f32> = serde_json::from_str(values.get())
                .map_err(|_| wrong(format!("embedding {index}'s values are not numbers")))?;
            let bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
            Vector::Base64(STANDARD.encode(bytes))
        } else {
            Vector::Floats(values)
        };
        data.push(Item {
            object: "embedding",
            index,
            embedding,
        });
    }
    Ok(serde_json::to_string(&data).expect("data always serialises"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn embedding(input: Value, format: Option<&str>) -> Embedding {
        Embedding {
            input,
            dimensions: Some(3),
            encoding_format: format.map(str::to_owned),
            user: Some("u".into()),
        }
    }

    #[test]
    fn each_text_is_a_request_of_its_own() {
        let e = embedding(json!(["tide", "moon"]), None);
        let body: Value = serde_json::from_slice(
            &GeminiEmbeddings::body("models/gemini-embedding-001", &e).unwrap(),
        )
        .unwrap();
        assert_eq!(
            body,
            json!({"requests": [
                {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "tide"}]},
                 "outputDimensionality": 3},
                {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "moon"}]},
                 "outputDimensionality": 3}]})
        );
        let why = GeminiEmbeddings::body("m", &embedding(json!([1, 2]), None)).unwrap_err();
        assert!(why.contains("token ids"), "{why}");
        assert!(GeminiEmbeddings::path("a/../b").is_err());
        assert_eq!(
            GeminiEmbeddings::path("gemini-embedding-001").unwrap().0,
            "/models/gemini-embedding-001:batchEmbedContents"
        );
    }

    #[test]
    fn the_answer_becomes_openais_data_as_floats_or_base64() {
        let answer = || -> Answer {
            serde_json::from_value(json!({"embeddings": [{"values": [0.5, -1.0, 0.25]}],
                                          "usageMetadata": {"promptTokenCount": 2}}))
            .unwrap()
        };
        let reply = GeminiEmbeddings::reply(answer(), &embedding(json!("tide"), None)).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&reply.content).unwrap(),
            json!([{"object": "embedding", "index": 0, "embedding": [0.5, -1.0, 0.25]}])
        );
        assert_eq!(
            (reply.input_tokens, reply.output_tokens),
            (Some(2), Some(0))
        );
        let e = embedding(json!("tide"), Some("base64"));
        let reply = GeminiEmbeddings::reply(answer(), &e).unwrap();
        let data: Value = serde_json::from_str(&reply.content).unwrap();
        let bytes = STANDARD
            .decode(data[0]["embedding"].as_str().unwrap())
            .unwrap();
        let floats: Vec<f32> = bytes
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(floats, [0.5, -1.0, 0.25]);
        let two = embedding(json!(["a", "b"]), None);
        let e = GeminiEmbeddings::reply(answer(), &two).err().unwrap();
        assert_eq!(e.kind, FailureKind::Transient);
        let bare: Answer =
            serde_json::from_value(json!({"embeddings": [{"values": [1]}]})).unwrap();
        let reply = GeminiEmbeddings::reply(bare, &embedding(json!("x"), None)).unwrap();
        assert_eq!((reply.input_tokens, reply.output_tokens), (None, None));
    }
}
