// The storage provider interface (STYLE habit 9). Web-standard types only: the domain depends on this file,
// never on node:fs or aws4fetch, so the core still runs on Workers.

/**
 * Where one artifact's bytes live, frozen in `artifacts.storage_location` when the artifact is created, so a
 * later switch of provider keeps old artifacts readable from where they were stored.
 */
export type StorageLocation =
  | { provider: "local"; base_dir: string; key: string }
  | {
      provider: "s3" | "r2";
      endpoint: string;
      region: string;
      bucket: string;
      force_path_style: boolean;
      access_key_id: string;
      /** Sealed with the key file's box; used when the current settings no longer name this bucket. */
      secret_access_key_sealed: string | null;
      key: string;
    };

/** A provider opened with usable credentials: what `AppDeps.openArtifactStore` receives. */
export type StoreTarget =
  | { provider: "local"; baseDir: string }
  | {
      provider: "s3" | "r2";
      endpoint: string;
      region: string;
      bucket: string;
      accessKeyId: string;
      secretAccessKey: string;
      forcePathStyle: boolean;
    };

export interface PresignedRequest {
  url: string;
  headers: Record<string, string>;
}

/** Why a streamed upload was refused; the values are the API's error codes (docs/api.md §7). */
export type UploadRejection = "size_mismatch" | "upload_too_large" | "checksum_mismatch";

export class UploadRejectedError extends Error {
  constructor(
    readonly reason: UploadRejection,
    message: string,
  ) {
    super(message);
    this.name = "UploadRejectedError";
  }
}

export interface WriteOptions {
  /** The declared size: a body longer or shorter is refused. */
  expectedSize: number;
  /** The daemon's upload limit (HANGAR_MAX_UPLOAD_BYTES). */
  maxBytes: number;
  /** Lower-case hex SHA-256 the body must have, when the runner declared one. */
  sha256?: string;
}

/** Inclusive byte range, as HTTP ranges are. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * One storage provider. Keys are relative object names chosen by the domain (`<build>/<artifact>`).
 * Local disk receives uploads itself (`writeStream`); S3/R2 hand out presigned URLs instead.
 */
export interface ArtifactStore {
  readonly kind: "local" | "s3";
  /** S3/R2: a presigned PUT the runner sends the bytes to. */
  presignUpload?(key: string, options: { contentType: string; expiresInS: number; now: number }): Promise<PresignedRequest>;
  /** S3/R2: a presigned GET whose response carries the given Content-Disposition and Content-Type. */
  presignDownload?(key: string, options: { contentDisposition: string; contentType: string; expiresInS: number; now: number }): Promise<string>;
  /** Local disk: stream a body to the key (temporary file, checks, fsync, rename). Answers the body's SHA-256. */
  writeStream?(key: string, body: AsyncIterable<Uint8Array>, options: WriteOptions): Promise<{ sha256: string }>;
  /** The stored object's size, or null when there is none. */
  head(key: string): Promise<{ sizeBytes: number } | null>;
  /** The object's bytes (or one range of them), read as the consumer pulls. */
  read(key: string, range?: ByteRange): Promise<ReadableStream<Uint8Array>>;
  /** A small inclusive range read into memory (the zip directory of an IPA). */
  readRange(key: string, range: ByteRange): Promise<Uint8Array>;
  /** Deletes the object and any leftover of an unfinished upload; a missing object is not an error. */
  remove(key: string): Promise<void>;
}
