import nodemailer from "nodemailer";
import { MailSendError, type MailSender } from "../domain/events/mail.ts";
import type { NodeOutbound } from "./outbound.ts";

/** Each SMTP step's deadline: a mail is an outbox delivery, which waits 10 s at most (docs/api.md §12). */
const SMTP_TIMEOUT_MS = 10_000;

/**
 * AppDeps.sendMail for a Node host: nodemailer, connected to the address the outbound guard resolved and allowed
 * (docs/api.md §12), so a name that later resolves elsewhere cannot send Hangar's mail to a private address. TLS
 * still checks the certificate against the host name (servername), not the address.
 */
export function createNodeMailSender(resolve: NodeOutbound["resolve"]): MailSender {
  return async (server, message) => {
    const bare = server.host.replace(/^\[|\]$/g, "");
    const { addresses } = await resolve(`https://${bare.includes(":") ? `[${bare}]` : bare}:${server.port}/`);
    const address = addresses[0];
    if (!address) throw new MailSendError(`the SMTP host ${server.host} does not resolve`, null);
    const isLiteral = /^[0-9.]+$/.test(bare) || bare.includes(":");
    const transport = nodemailer.createTransport({
      host: address,
      port: server.port,
      secure: server.secure,
      ...(server.username ? { auth: { user: server.username, pass: server.password ?? "" } } : {}),
      tls: isLiteral ? {} : { servername: bare },
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
      dnsTimeout: SMTP_TIMEOUT_MS,
    });
    try {
      const info = await transport.sendMail({
        from: server.from,
        to: message.to,
        subject: message.subject,
        text: message.text,
        headers: message.headers,
      });
      const code = Number(/^(\d{3})/.exec(String(info.response ?? ""))?.[1] ?? Number.NaN);
      return { code: Number.isFinite(code) ? code : null };
    } catch (err) {
      const responseCode = (err as { responseCode?: unknown }).responseCode;
      if (typeof responseCode === "number") throw new MailSendError((err as Error).message, responseCode);
      throw err;
    } finally {
      transport.close();
    }
  };
}
