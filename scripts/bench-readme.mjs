// Shared by the Node bench scripts: puts a table between a README's
// `<!-- NAME: start -->` and `<!-- NAME: end -->` markers.
import { readFileSync, writeFileSync } from 'node:fs';

export function writeSection(readme, name, table) {
  const text = readFileSync(readme, 'utf8');
  const start = `<!-- ${name}: start -->`;
  const end = `<!-- ${name}: end -->`;
  if (!text.includes(start) || !text.includes(end)) throw new Error(`${readme} lacks the ${start} and ${end} markers`);
  writeFileSync(readme, `${text.slice(0, text.indexOf(start) + start.length)}\n${table}\n${text.slice(text.indexOf(end))}`);
}
