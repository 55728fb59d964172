import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { UsageError } from '../exit-codes.js';
import { readStdin } from '../prompt.js';

/** A file's text, or standard input's for `-`; a file that cannot be read is a usage error. */
export async function readText(path: string): Promise<string> {
  if (path === '-') return readStdin();
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(
      `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    );
  }
}

/** A JSON or YAML document from a file or `-` (JSON is YAML). */
export async function readInput(path: string): Promise<unknown> {
  const text = await readText(path);
  try {
    return parse(text) as unknown;
  } catch (error) {
    throw new UsageError(
      `${path === '-' ? 'standard input' : path} is neither JSON nor YAML: ${(error as Error).message}`,
    );
  }
}
