//! Vertex AI's embeddings: `publishers/google/models/M:predict`, the
//! prediction API its text-embedding models (`text-embedding-005`,
//! `text-multilingual-embedding-002`, `gemini-embedding-001`) are served
//! by: the input texts as `instances` (`{"content": …}`), the client's
//! `dimensions` as `parameters.outputDimensionality`, and each
//! prediction's `embeddings.values` made into OpenAI's `data` array as
//! Gemini's are. Each prediction counts its own input tokens
//! (`statistics.token_count`): their sum is the attempt's input.

use crate::adapter::ModelPath;
use crate::embeddings::EmbeddingsFormat;
use crate::gemini::embeddings::{data, texts};
use crate::gemini::model_name;
use callai_engine::{ProviderFailure, ProviderReply};
use callai_wire::Embedding;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Vertex AI's `:predict` for text embeddings.
#[derive(Debug)]
pub struct VertexEmbeddings;

#[derive(Serialize)]
struct Predict<'a> {
    instances: Vec<Instance<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Parameters>,
}

#[derive(Serialize)]
struct Instance<'a> {
    content: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Parameters {
    output_dimensionality: u32,
}

/// A `:predict` answer.
#[derive(Deserialize)]
pub struct Answer {
    #[serde(default)]
    predictions: Vec<Prediction>,
}

#[derive(Deserialize)]
struct Prediction {
    embeddings: Embeddings,
}

#[derive(Deserialize)]
struct Embeddings {
    values: Box<RawValue>,
    #[serde(default)]
    statistics: Option<Statistics>,
}

#[derive(Deserialize)]
struct Statistics {
    #[serde(default)]
    token_count: Option<f64>,
}

impl EmbeddingsFormat for VertexEmbeddings {
    type Answer = Answer;

    fn path(model: &str) -> Result<ModelPath, String> {
        Ok((format!("/models/{}:predict", model_name(model)?), &[]))
    }

    fn body(_model: &str, embedding: &Embedding) -> Result<Vec<u8>, String> {
        let instances = texts(&embedding.input)?
            .into_iter()
            .map(|content| Instance { content })
            .collect();
        let parameters = embedding.dimensions.map(|d| Parameters {
            output_dimensionality: d,
        });
        let body = Predict {
            instances,
            parameters,
        };
        Ok(serde_json::to_vec(&body).expect("a prediction request always serialises"))
    }

    /// The reply: OpenAI's `data`, and the predictions' token counts
    /// summed when every one says its own (else the usage is unknown).
    fn reply(answer: Answer, embedding: &Embedding) -> Result<ProviderReply, ProviderFailure> {
        let predictions = &answer.predictions;
        let data = data(predictions.iter().map(|p| &*p.embeddings.values), embedding)?;
        let counts: Option<Vec<f64>> = predictions
            .iter()
            .map(|p| p.embeddings.statistics.as_ref()?.token_count)
            .collect();
        // Token counts are whole numbers the API writes as JSON numbers.
        let input = counts.map(|c| c.iter().sum::<f64>() as u32);
        Ok(crate::embeddings::embedded(data, input, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn the_texts_are_instances_and_the_predictions_openais_data() {
        let e = Embedding {
            input: json!(["tide", "moon"]),
            dimensions: Some(2),
            encoding_format: None,
            user: None,
        };
        let body: Value =
            serde_json::from_slice(&VertexEmbeddings::body("text-embedding-005", &e).unwrap())
                .unwrap();
        assert_eq!(
            body,
            json!({"instances": [{"content": "tide"}, {"content": "moon"}],
                   "parameters": {"outputDimensionality": 2}})
        );
        assert_eq!(
            VertexEmbeddings::path("text-embedding-005").unwrap().0,
            "/models/text-embedding-005:predict"
        );
        let answer: Answer = serde_json::from_value(json!({"predictions": [
            {"embeddings": {"values": [0.5, 1], "statistics": {"token_count": 2, "truncated": false}}},
            {"embeddings": {"values": [0.25, 0], "statistics": {"token_count": 3.0, "truncated": false}}}],
            "metadata": {"billableCharacterCount": 8}}))
        .unwrap();
        let reply = VertexEmbeddings::reply(answer, &e).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&reply.content).unwrap(),
            json!([{"object": "embedding", "index": 0, "embedding": [0.5, 1]},
                   {"object": "embedding", "index": 1, "embedding": [0.25, 0]}])
        );
        assert_eq!(
            (reply.input_tokens, reply.output_tokens),
            (Some(5), Some(0))
        );
        let short: Answer = serde_json::from_value(json!({"predictions": [
            {"embeddings": {"values": [0.5, 1]}}]}))
        .unwrap();
        assert!(VertexEmbeddings::reply(short, &e).is_err(), "one of two");
    }
}
