//! `callai new --lang ts`: a TypeScript pack, the SDK as the npm tarball
//! this binary carries, and a lockfile made from the SDK's own, so that
//! `npm ci` installs exactly the build tools (componentize-js, esbuild, and
//! the TypeScript compiler whose check the build runs first) this
//! repository builds with, from the registry or from npm's cache.

use super::File;
use serde_json::{Map, Value, json};

/// The SDK's lockfile: the versions and integrities of its dependencies.
const SDK_LOCK: &str = include_str!("../../../../guest-sdk-ts/package-lock.json");

/// The compiler's settings: the SDK's own, over the pack's sources and the
/// SDK's declarations of the host's imports.
const TSCONFIG: &str = r#"{
  "compilerOptions": {
    "target": "es2022",
    "module": "es2022",
    "moduleResolution": "bundler",
    "lib": ["es2022"],
    "strict": true,
    "noEmit": true,
    "skipLibCheck": true,
    "types": []
  },
  "include": ["src/**/*.ts", "node_modules/@openwop/callai-sdk/src/wit.d.ts"]
}
"#;

const INDEX: &str = r#"// A pack node: asks for a scene as structured output and reports the
// provider requests it really took (RFC 0248 `attempts`).
import { call, defineNode, Request } from '@openwop/callai-sdk';

export const run = defineNode((input: { premise: string }) => {
  const request = Request.new()
    .system('You write short scenes.')
    .user(input.premise)
    .maxTokens(200)
    .schema({ type: 'object', required: ['scene'], properties: { scene: { type: 'string' } } });
  const response = call(request);
  return {
    scene: response.data,
    requests: response.attempts?.count ?? 1,
    outputTokens: response.attempts?.outputTokens,
  };
});
"#;

/// `package.json` and `package-lock.json` of a pack called `name` that
/// depends on the tarball `tarball` (a path relative to the pack).
fn manifests(name: &str, tarball: &str) -> (Value, Value) {
    let dependency = format!("file:{tarball}");
    let package = json!({
        "name": name,
        "version": "0.1.0",
        "private": true,
        "type": "module",
        // The type check first: a build that would fail at run time (a
        // string where the SDK takes a number) fails here, with tsc's message.
        "scripts": {
            "check": "tsc --noEmit -p .",
            "build": "tsc --noEmit -p . && callai-pack build src/index.ts -o pack.wasm",
        },
        "dependencies": {"@openwop/callai-sdk": dependency},
    });
    let sdk: Value = serde_json::from_str(SDK_LOCK).expect("the SDK's lockfile is JSON");
    let sdk_packages = sdk["packages"].as_object().cloned().unwrap_or_default();
    let root = &sdk_packages[""];
    // The SDK's compiler, at its version: the pack's one development tool.
    let compiler = root["devDependencies"]["typescript"].clone();
    let mut package = package;
    package["devDependencies"] = json!({"typescript": compiler});
    let mut packages = Map::new();
    packages.insert(
        String::new(),
        json!({"name": name, "version": "0.1.0", "dependencies": {"@openwop/callai-sdk": dependency},
               "devDependencies": {"typescript": compiler}}),
    );
    let mut entry = json!({"version": root["version"], "resolved": dependency});
    for key in ["license", "dependencies", "bin", "engines"] {
        entry[key] = root[key].clone();
    }
    packages.insert("node_modules/@openwop/callai-sdk".into(), entry);
    // The SDK's own dependencies, as its lockfile pins them (of its
    // development tools, the compiler alone).
    packages.extend(sdk_packages.into_iter().filter(|(key, v)| {
        !key.is_empty() && (v["dev"] != true || key == "node_modules/typescript")
    }));
    let lock = json!({
        "name": name,
        "version": "0.1.0",
        "lockfileVersion": 3,
        "requires": true,
        "packages": packages,
    });
    (package, lock)
}

/// The files of a TypeScript pack called `name`.
pub fn files(name: &str) -> Vec<File> {
    let sdk = callai_examples::TS_SDK
        .expect("this callai was built with node: it carries the TypeScript SDK");
    let tarball = format!(".callai/{}", sdk.file_name);
    let (package, lock) = manifests(name, &tarball);
    let pretty = |v: &Value| serde_json::to_string_pretty(v).expect("JSON") + "\n";
    vec![
        File::text("package.json", pretty(&package)),
        File::text("package-lock.json", pretty(&lock)),
        File::text("src/index.ts", INDEX.into()),
        File::text("tsconfig.json", TSCONFIG.into()),
        File::bytes(tarball, sdk.bytes.to_vec()),
        File::text(
            "README.md",
            format!(
                "# {name}\n\nA callAI pack in TypeScript (`src/index.ts`); the SDK is in `.callai/`.\n\n\
                 ```sh\nnpm ci && npm run build   # type-checks (tsc), then builds pack.wasm\ncallai run pack.wasm --script mock.json --input-file input.json\n```\n"
            ),
        ),
    ]
}
