import { z } from "zod";

/**
 * A pipeline's `publish` entries (docs/publishing.md): where a succeeded protected build's app goes. A
 * `user_fraction` strictly between 0 and 1 makes a Google Play release a staged rollout (`inProgress`).
 */
export const testflightPublishSchema = z.strictObject({
  to: z.literal("testflight"),
  groups: z.array(z.string().min(1).max(200)).max(50).optional(),
  what_to_test: z.string().min(1).max(4000).optional(),
});

export const googlePlayPublishSchema = z
  .strictObject({
    to: z.literal("google_play"),
    package_name: z
      .string()
      .regex(/^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/, "an Android package name (com.example.app)")
      .optional(),
    track: z.string().min(1).max(100),
    status: z.enum(["completed", "draft"]).optional(),
    user_fraction: z.number().gt(0).lt(1).optional(),
  })
  .refine((p) => !(p.user_fraction !== undefined && p.status === "draft"), {
    message: "a draft release has no user_fraction",
    path: ["user_fraction"],
  });

export const publishEntrySchema = z.discriminatedUnion("to", [testflightPublishSchema, googlePlayPublishSchema]);
export const publishListSchema = z
  .array(publishEntrySchema)
  .max(10)
  .refine((list) => new Set(list.map((p) => p.to)).size === list.length, "one entry per store");

export type PublishEntry = z.infer<typeof publishEntrySchema>;
export type TestflightPublish = z.infer<typeof testflightPublishSchema>;
export type GooglePlayPublish = z.infer<typeof googlePlayPublishSchema>;
