//! Components made byte by byte, for tests of what the host does before it
//! compiles one: a core module with a function of a chosen size wrapped in
//! a component (a compile bomb when large), as no pack or in a pack node's
//! shape (it exports `run`), and a component made distinct by a custom
//! section.

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

/// A pack node's shape around a function of `body_len` bytes: a component
/// that exports `run: func(input: string) -> result<string, string>`
/// (lifted from a core function that answers `Ok("")`) and whose core
/// module also holds the large function, which the host compiles but never
/// calls. It passes every check made before a compile, then takes as long
/// to compile as its function makes it; `tag` (a custom section) makes its
/// bytes distinct.
pub fn pack_with_function(body_len: usize, tag: &str) -> Vec<u8> {
    use wasm_encoder::{
        CanonicalOption, CodeSection, ComponentBuilder, ComponentExportKind, ComponentValType,
        ExportKind, ExportSection, Function, FunctionSection, Instruction, MemorySection,
        MemoryType, Module, PrimitiveValType, TypeSection, ValType,
    };
    let i32s = |n: usize| vec![ValType::I32; n];
    let mut types = TypeSection::new();
    types.ty().function([], []);
    types.ty().function(i32s(2), i32s(1));
    types.ty().function(i32s(4), i32s(1));
    let mut functions = FunctionSection::new();
    for ty in [0, 1, 2] {
        functions.function(ty);
    }
    let mut memory = MemorySection::new();
    memory.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("run", ExportKind::Func, 1);
    exports.export("cabi_realloc", ExportKind::Func, 2);
    let mut code = CodeSection::new();
    // A body is its locals' count (one byte), the instructions, `end`.
    let mut large = Function::new([]);
    for _ in 0..body_len.saturating_sub(2) / 3 {
        large.instruction(&Instruction::I32Const(0));
        large.instruction(&Instruction::Drop);
    }
    large.instruction(&Instruction::End);
    code.function(&large);
    // `run` answers from address 0 of a zeroed memory: Ok, an empty text.
    let mut run = Function::new([]);
    run.instruction(&Instruction::I32Const(0));
    run.instruction(&Instruction::End);
    code.function(&run);
    let mut realloc = Function::new([]);
    realloc.instruction(&Instruction::I32Const(1024));
    realloc.instruction(&Instruction::End);
    code.function(&realloc);
    let mut module = Module::new();
    module
        .section(&types)
        .section(&functions)
        .section(&memory)
        .section(&exports)
        .section(&code);
    let mut component = ComponentBuilder::default();
    let m = component.core_module(None, &module);
    let instance =
        component.core_instantiate(None, m, Vec::<(&str, wasm_encoder::ModuleArg)>::new());
    let mem = component.core_alias_export(None, instance, "memory", ExportKind::Memory);
    let run = component.core_alias_export(None, instance, "run", ExportKind::Func);
    let realloc = component.core_alias_export(None, instance, "cabi_realloc", ExportKind::Func);
    let string = ComponentValType::Primitive(PrimitiveValType::String);
    let (result, ty) = component.type_defined(None);
    ty.result(Some(string), Some(string));
    let (func_ty, mut ty) = component.type_function(None);
    ty.params([("input", string)])
        .result(Some(ComponentValType::Type(result)));
    let options = [
        CanonicalOption::Memory(mem),
        CanonicalOption::Realloc(realloc),
        CanonicalOption::UTF8,
    ];
    let lifted = component.lift_func(None, run, func_ty, options);
    component.export("run", ComponentExportKind::Func, lifted, None);
    with_custom_section(component.finish(), tag)
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
