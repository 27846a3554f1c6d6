// The scene the node asks for, and its own closed-world check: stricter than
// the schema the host validates, as a real pack's is. The rules, and their
// messages, of examples/bookai-scene/src/scene.rs.

export const MOODS = ['calm', 'tense', 'joyful', 'melancholy'];
const FIELDS = ['title', 'scene', 'characters', 'mood'];

/** How Rust's `{:?}` shows a list of strings. */
const debugList = (items: string[]): string => `[${items.map((i) => JSON.stringify(i)).join(', ')}]`;

/** The schema sent with the request: the host checks shape and types. */
export function schema(): unknown {
  return {
    type: 'object',
    required: FIELDS,
    properties: {
      title: { type: 'string' },
      scene: { type: 'string' },
      characters: { type: 'array', items: { type: 'string' } },
      mood: { type: 'string' },
    },
  };
}

/** The node's own check, closed-world; a message when it fails. */
export function validate(data: unknown): string | undefined {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return 'the scene must be a JSON object';
  }
  const obj = data as Record<string, unknown>;
  const extra = Object.keys(obj).find((k) => !FIELDS.includes(k));
  if (extra !== undefined) {
    return `unexpected field ${JSON.stringify(extra)}: only ${debugList(FIELDS)} are allowed`;
  }
  const text = (k: string): string => (typeof obj[k] === 'string' ? (obj[k] as string) : '');
  if (text('title').trim() === '') return 'title must be a non-empty string';
  if ([...text('scene')].length < 20) return 'scene must be at least 20 characters';
  if (!MOODS.includes(text('mood'))) return `mood must be one of ${debugList(MOODS)}`;
  const characters = obj.characters;
  if (!Array.isArray(characters) || characters.length === 0 || characters.some((n) => typeof n !== 'string')) {
    return 'characters must be a non-empty list of names';
  }
  return undefined;
}
