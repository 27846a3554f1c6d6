// The book's research notes, which the two tools read (the notes of
// examples/bookai-research, word for word).

const NOTES: [string, string, string][] = [
  [
    'n1',
    'Skerry lighthouse, 1921',
    "The Skerry light was lit by paraffin until 1921, when an acetylene lamp and a sun valve made the keeper's night watch unnecessary.",
  ],
  [
    'n2',
    "Keepers' letters",
    'Keepers wrote to the Northern Lighthouse Board weekly; letters went out with the relief boat, which could not land in a westerly gale for weeks at a time.',
  ],
  ['n3', 'Fog signals', 'A fog signal sounded twice every ninety seconds; keepers logged each hour of fog.'],
  ['n4', 'Relief boat', 'The relief boat came every fortnight with stores, mail and the relieving keeper.'],
];

/** Whether `c` is a letter or a digit (the engine the pack runs on has no `\p{...}` classes). */
function alphanumeric(c: string): boolean {
  return c.toLowerCase() !== c.toUpperCase() || (c >= '0' && c <= '9');
}

/** `word` without what is not a letter or a digit at either end. */
function trim(word: string): string {
  const chars = [...word];
  let start = 0;
  let end = chars.length;
  while (start < end && !alphanumeric(chars[start])) start += 1;
  while (end > start && !alphanumeric(chars[end - 1])) end -= 1;
  return chars.slice(start, end).join('');
}

/** The notes whose title or text mentions any word of `query`. */
export function search(query: string): { notes: { id: string; title: string }[] } {
  const words = query
    .split(/\s+/)
    .map((w) => trim(w).toLowerCase())
    .filter((w) => w.length > 2);
  const notes = NOTES.filter(([, title, text]) => {
    const hay = `${title} ${text}`.toLowerCase();
    return words.some((w) => hay.includes(w));
  }).map(([id, title]) => ({ id, title }));
  return { notes };
}

/** The note `id`, in full. */
export function read(id: string): string | undefined {
  const note = NOTES.find(([i]) => i === id);
  return note === undefined ? undefined : `${note[1]}: ${note[2]}`;
}
