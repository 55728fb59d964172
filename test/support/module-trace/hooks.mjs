// Loader hooks of register.mjs (they run on the loader's thread): each module's URL as it loads.
import { appendFileSync } from 'node:fs';

let file;

export function initialize(data) {
  file = data.file;
}

export async function load(url, context, nextLoad) {
  const loaded = await nextLoad(url, context);
  appendFileSync(file, `${url}\n`);
  return loaded;
}
