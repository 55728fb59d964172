import { Controller, Param, Post, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { Public } from '../auth/require-permission.decorator.js';
import { ApiErrors } from '../common/openapi.js';
import { ApiBody, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { leaveBodyUnread, readUploadBody } from '../common/upload-body.js';
import { DeliveryAcceptedResponse } from './dto/trigger.dto.js';
import { toDeliveryResponse } from './triggers.service.js';
import { WebhookReceiver } from './webhook-receiver.js';

/**
 * Where git hosts deliver webhooks: no bearer token, the provider's signature over the raw body
 * instead (docs/build-on-push.md).
 */
@ApiTags('triggers')
@Controller('hooks')
export class WebhooksController {
  constructor(private readonly receiver: WebhookReceiver) {}

  @Post(':id')
  @Public()
  @ApiOperation({
    // No bearer token: the git host's signature over the body, with the trigger's secret.
    security: [],
    summary: 'Deliver a webhook (the git host)',
    description:
      "Used by GitHub, GitLab, Gitea and Forgejo, not by people. Authenticated by the trigger's secret: X-Hub-Signature-256 (GitHub), X-Gitlab-Token (GitLab), X-Gitea-Signature / X-Forgejo-Signature (Gitea, Forgejo). 202: recorded, the build follows; 200: a delivery id seen before (nothing is built again) or a ping. 401 alike for an unknown trigger and a wrong signature.",
  })
  @ApiBody({ schema: { type: 'object' } })
  @ApiErrors(
    202,
    { type: DeliveryAcceptedResponse, description: 'Recorded; the build follows' },
    [400, 401, 413, 429],
    {
      401: 'Webhook signature could not be verified',
      413: 'Larger than KILN_WEBHOOK_MAX_BODY_BYTES',
    },
  )
  async deliver(
    @Param('id') id: string,
    @Req() request: Request,
    @Res({ passthrough: true }) response: Response,
  ): Promise<
    DeliveryAcceptedResponse | { pong: true; delivery: DeliveryAcceptedResponse['delivery'] }
  > {
    try {
      const trigger = await this.receiver.admit(id, request.ip);
      const body = await readUploadBody(request, this.receiver.maxBodyBytes);
      const answer = await this.receiver.receive(trigger, request.headers, body, request.ip);
      const delivery = toDeliveryResponse(answer.received.delivery);
      if (answer.kind === 'pong') {
        response.status(200);
        return { pong: true, delivery };
      }
      response.status(answer.received.duplicate ? 200 : 202);
      return {
        delivery: answer.received.duplicate ? { ...delivery, outcome: 'duplicate' } : delivery,
      };
    } catch (error) {
      leaveBodyUnread(request, response);
      throw error;
    }
  }
}
