//! Components made byte by byte, for tests of what the host does before it
//! compiles one: a core module with a function of a chosen size wrapped in
//! a component (a compile bomb when large), and a component made distinct
//! by a custom section.

/// `n` as unsigned LEB128.
fn leb(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn section(id: u8, content: &[u8], out: &mut Vec<u8>) {
    out.push(id);
    leb(content.len(), out);
    out.extend_from_slice(content);
}

/// A component holding one core module with one function whose body is
/// `body_len` bytes (no locals, `i32.const 0; drop` repeated, then `nop`s
/// and `end`), and `tag` in a custom section so that two calls with other
/// tags give different bytes. It compiles, and is no pack (no `run`).
pub fn component_with_function(body_len: usize, tag: &str) -> Vec<u8> {
    assert!(body_len >= 2);
    let mut body = vec![0u8];
    while body.len() + 3 < body_len {
        body.extend_from_slice(&[0x41, 0x00, 0x1a]);
    }
    body.resize(body_len - 1, 0x01);
    body.push(0x0b);
    let mut code = vec![1u8];
    leb(body.len(), &mut code);
    code.extend_from_slice(&body);
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 0, 0], &mut module);
    section(3, &[1, 0], &mut module);
    section(10, &code, &mut module);
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    section(1, &module, &mut component);
    with_custom_section(component, tag)
}

/// `component` with a custom section `callai-test` holding `tag` at its
/// end: the same component to wasmtime, other bytes to a hash.
pub fn with_custom_section(mut component: Vec<u8>, tag: &str) -> Vec<u8> {
    let name = b"callai-test";
    let mut content = Vec::new();
    leb(name.len(), &mut content);
    content.extend_from_slice(name);
    content.extend_from_slice(tag.as_bytes());
    section(0, &content, &mut component);
    component
}
