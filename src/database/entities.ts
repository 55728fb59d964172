/** Every TypeORM entity kiln maps. Feature modules add theirs here. */
export const ENTITIES: ReadonlyArray<new () => object> = [];
