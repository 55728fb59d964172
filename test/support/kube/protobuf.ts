/**
 * Request bodies in Kubernetes' protobuf encoding, decoded to the JSON the double stores.
 *
 * client-go's typed clients send protobuf for built-in kinds: `kubectl create namespace|secret`,
 * and helm's release storage, which creates, updates and deletes its `sh.helm.release.v1.*`
 * Secrets through a typed clientset. The double decodes the kinds those clients send (Secret,
 * ConfigMap, Namespace, and DeleteOptions on a delete) and refuses any other protobuf body with
 * 415, as before. Responses stay JSON, which these clients also accept.
 *
 * The wire format: the four bytes `k8s\0`, then a runtime.Unknown message (typeMeta = 1, raw = 2,
 * contentEncoding = 3, contentType = 4) whose `raw` is the object's own message. Field numbers
 * below are those of k8s.io/api/core/v1 and k8s.io/apimachinery/pkg/apis/meta/v1 generated.proto.
 */

type Scalar = 'string' | 'bytes' | 'bool' | 'int64' | 'int32' | 'time' | 'fieldsV1';
type FieldType =
  | Scalar
  | { message: Message }
  | { repeated: Scalar | { message: Message } }
  | { map: 'string' | 'bytes' };
/** A message: field number → JSON name and type. */
type Message = Record<number, [string, FieldType]>;

const TYPE_META: Message = { 1: ['apiVersion', 'string'], 2: ['kind', 'string'] };
const UNKNOWN: Message = {
  1: ['typeMeta', { message: TYPE_META }],
  2: ['raw', 'bytes'],
  3: ['contentEncoding', 'string'],
  4: ['contentType', 'string'],
};
const OWNER_REFERENCE: Message = {
  1: ['kind', 'string'],
  3: ['name', 'string'],
  4: ['uid', 'string'],
  5: ['apiVersion', 'string'],
  6: ['controller', 'bool'],
  7: ['blockOwnerDeletion', 'bool'],
};
const MANAGED_FIELDS_ENTRY: Message = {
  1: ['manager', 'string'],
  2: ['operation', 'string'],
  3: ['apiVersion', 'string'],
  4: ['time', 'time'],
  6: ['fieldsType', 'string'],
  7: ['fieldsV1', 'fieldsV1'],
  8: ['subresource', 'string'],
};
const OBJECT_META: Message = {
  1: ['name', 'string'],
  2: ['generateName', 'string'],
  3: ['namespace', 'string'],
  4: ['selfLink', 'string'],
  5: ['uid', 'string'],
  6: ['resourceVersion', 'string'],
  7: ['generation', 'int64'],
  8: ['creationTimestamp', 'time'],
  9: ['deletionTimestamp', 'time'],
  10: ['deletionGracePeriodSeconds', 'int64'],
  11: ['labels', { map: 'string' }],
  12: ['annotations', { map: 'string' }],
  13: ['ownerReferences', { repeated: { message: OWNER_REFERENCE } }],
  14: ['finalizers', { repeated: 'string' }],
  17: ['managedFields', { repeated: { message: MANAGED_FIELDS_ENTRY } }],
};
const METADATA: [string, FieldType] = ['metadata', { message: OBJECT_META }];

/** The kinds decoded, by `apiVersion/kind` of the envelope. */
const KINDS: Record<string, Message> = {
  'v1/Secret': {
    1: METADATA,
    2: ['data', { map: 'bytes' }],
    3: ['type', 'string'],
    4: ['stringData', { map: 'string' }],
    5: ['immutable', 'bool'],
  },
  'v1/ConfigMap': {
    1: METADATA,
    2: ['data', { map: 'string' }],
    3: ['binaryData', { map: 'bytes' }],
    4: ['immutable', 'bool'],
  },
  'v1/Namespace': {
    1: METADATA,
    2: ['spec', { message: { 1: ['finalizers', { repeated: 'string' }] } }],
    3: ['status', { message: { 1: ['phase', 'string'] } }],
  },
  // A typed client's Delete sends its DeleteOptions as the body, encoded like its objects.
  'v1/DeleteOptions': {
    1: ['gracePeriodSeconds', 'int64'],
    2: ['preconditions', { message: { 1: ['uid', 'string'], 2: ['resourceVersion', 'string'] } }],
    3: ['orphanDependents', 'bool'],
    4: ['propagationPolicy', 'string'],
    5: ['dryRun', { repeated: 'string' }],
  },
};

const MAGIC = Buffer.from('k8s\0', 'latin1');

export const PROTOBUF = 'application/vnd.kubernetes.protobuf';

/** Thrown for a body the double cannot decode; the caller answers 415 or 400. */
export class ProtobufError extends Error {
  constructor(
    message: string,
    /** True when the body is well formed but of a kind the double does not decode. */
    readonly unsupportedKind = false,
  ) {
    super(message);
  }
}

/** Decodes a protobuf request body (magic, Unknown envelope, object) to its JSON form. */
export function decodeKubernetesProtobuf(body: Buffer): Record<string, unknown> {
  if (body.length < MAGIC.length || !body.subarray(0, MAGIC.length).equals(MAGIC))
    throw new ProtobufError('the protobuf body does not start with the Kubernetes magic number');
  const envelope = decodeMessage(new Reader(body.subarray(MAGIC.length)), UNKNOWN);
  const typeMeta = (envelope['typeMeta'] ?? {}) as { apiVersion?: string; kind?: string };
  const apiVersion = typeMeta.apiVersion ?? '';
  const kind = typeMeta.kind ?? '';
  // DeleteOptions travel as meta.k8s.io/v1 or as v1: both name the same message.
  const schema = KINDS[`${apiVersion.replace(/^meta\.k8s\.io\//, '')}/${kind}`];
  if (schema === undefined)
    throw new ProtobufError(`${apiVersion}/${kind} is not decoded from protobuf here`, true);
  if ((envelope['contentEncoding'] ?? '') !== '')
    throw new ProtobufError(
      `content encoding ${String(envelope['contentEncoding'])} is not supported`,
    );
  const raw = Buffer.from((envelope['raw'] as string | undefined) ?? '', 'base64');
  return { apiVersion, kind, ...decodeMessage(new Reader(raw), schema) };
}

function decodeMessage(reader: Reader, schema: Message): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  while (!reader.done()) {
    const tag = reader.varint();
    const number = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    const field = schema[number];
    if (field === undefined) {
      reader.skip(wire);
      continue;
    }
    const [name, type] = field;
    if (typeof type === 'object' && 'map' in type) {
      const entry = new Reader(reader.bytes());
      const pair = decodeMessage(entry, { 1: ['key', 'string'], 2: ['value', type.map] });
      const map = (out[name] ??= {}) as Record<string, unknown>;
      map[(pair['key'] as string | undefined) ?? ''] = pair['value'] ?? '';
    } else if (typeof type === 'object' && 'repeated' in type) {
      ((out[name] ??= []) as unknown[]).push(decodeValue(reader, type.repeated));
    } else {
      out[name] = decodeValue(reader, type);
    }
  }
  return out;
}

function decodeValue(reader: Reader, type: Scalar | { message: Message }): unknown {
  if (typeof type === 'object') return decodeMessage(new Reader(reader.bytes()), type.message);
  switch (type) {
    case 'string':
      return reader.bytes().toString('utf8');
    case 'bytes':
      return reader.bytes().toString('base64');
    case 'bool':
      return reader.varint() !== 0n;
    case 'int64':
      return Number(BigInt.asIntN(64, reader.varint()));
    case 'int32':
      return Number(BigInt.asIntN(32, reader.varint()));
    case 'time': {
      const time = decodeMessage(new Reader(reader.bytes()), {
        1: ['seconds', 'int64'],
        2: ['nanos', 'int32'],
      });
      // metav1.Time marshals to JSON at second precision.
      return new Date(Number(time['seconds'] ?? 0) * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
    }
    case 'fieldsV1': {
      const fields = decodeMessage(new Reader(reader.bytes()), { 1: ['raw', 'bytes'] });
      const raw = Buffer.from((fields['raw'] as string | undefined) ?? '', 'base64');
      return raw.length === 0 ? {} : (JSON.parse(raw.toString('utf8')) as unknown);
    }
  }
}

/** Protobuf's wire format, read forwards. */
class Reader {
  private at = 0;

  constructor(private readonly buffer: Buffer) {}

  done(): boolean {
    return this.at >= this.buffer.length;
  }

  varint(): bigint {
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.at >= this.buffer.length) throw new ProtobufError('a varint runs past the body');
      const byte = this.buffer[this.at++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
    }
    throw new ProtobufError('a varint is longer than ten bytes');
  }

  bytes(): Buffer {
    const length = Number(this.varint());
    if (this.at + length > this.buffer.length)
      throw new ProtobufError('a length-delimited field runs past the body');
    const bytes = this.buffer.subarray(this.at, this.at + length);
    this.at += length;
    return bytes;
  }

  skip(wire: number): void {
    switch (wire) {
      case 0:
        this.varint();
        return;
      case 1:
        this.at += 8;
        return;
      case 2:
        this.bytes();
        return;
      case 5:
        this.at += 4;
        return;
      default:
        throw new ProtobufError(`wire type ${wire} is not supported`);
    }
  }
}
