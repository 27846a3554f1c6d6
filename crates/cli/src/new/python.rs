//! `callai new --lang py`: a Python pack, the SDK as the wheel this binary
//! carries, and the build tool (componentize-py) pinned with its hash.

use super::File;

/// componentize-py (and wheel), pinned with their hashes.
const REQUIREMENTS: &str = include_str!("../../../../guest-sdk-py/requirements-build.txt");

const APP: &str = r#""""A pack node: asks for a scene as structured output and reports the
provider requests it really took (RFC 0248 ``attempts``)."""

from callai_sdk import Request, call, node


@node
def draft(input):
    request = (
        Request()
        .system("You write short scenes.")
        .user(input["premise"])
        .max_tokens(200)
        .schema({"type": "object", "required": ["scene"],
                 "properties": {"scene": {"type": "string"}}})
    )
    response = call(request)
    attempts = response.attempts
    return {
        "scene": response.data,
        "requests": attempts.count if attempts else 1,
        "outputTokens": attempts.output_tokens if attempts else None,
    }
"#;

/// The files of a Python pack called `name`.
pub fn files(name: &str) -> Vec<File> {
    let sdk = callai_examples::PY_SDK
        .expect("this callai was built with python3: it carries the Python SDK");
    let wheel = format!(".callai/{}", sdk.file_name);
    vec![
        File::text("app.py", APP.into()),
        File::text(".callai/requirements-build.txt", REQUIREMENTS.into()),
        File::bytes(wheel.clone(), sdk.bytes.to_vec()),
        File::text(
            "README.md",
            format!(
                "# {name}\n\nA callAI pack in Python (`app.py`); the SDK is in `.callai/`.\n\n\
                 ```sh\npython3 -m venv .venv && .venv/bin/pip install --require-hashes -r .callai/requirements-build.txt\n\
                 .venv/bin/pip install --no-deps {wheel} && .venv/bin/callai-pack-py build app.py -o pack.wasm\n\
                 callai run pack.wasm --script mock.json --input-file input.json\n```\n"
            ),
        ),
    ]
}
