import type { components, paths } from './schema.gen.js';

/** kiln's routes, as the OpenAPI document kiln builds from its own code describes them. */
export type ApiPaths = paths;
/** The document's schemas (BuildDto, ProjectResponse, …). */
export type Schemas = components['schemas'];
