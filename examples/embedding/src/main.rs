//! `cargo run -p callai-embedding-example`: hosts the echo-attempts pack and
//! prints its output and every event of the run.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = callai_embedding_example::run_pack().await?;
    println!("output: {}", out.result?);
    for event in &out.events {
        println!("event: {}", event.to_json());
    }
    Ok(())
}
