import { Controller, Get, HttpCode, Param, Put, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import type { Request, Response } from 'express';
import { Public, RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { MAX_JSON_DEPTH } from '../common/json-body.js';
import { ApiErrors, ApiTenantScoped, UPLOAD_TOKEN_SCHEME } from '../common/openapi.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import type { ArtifactKind } from '../artifacts/artifacts.repository.js';
import { ScanDto, SbomDto } from './artifacts.dto.js';
import {
  BuildArtifacts,
  type SbomView,
  type ScanView,
  UPLOAD_LIMIT_FACTOR,
} from '../artifacts/build-artifacts.js';
import { leaveBodyUnread, readUploadBody } from '../common/upload-body.js';

const UPLOAD_DESCRIPTION =
  "Used by the build's own pod, not by people: the body is the tool's JSON output " +
  '(Content-Type application/json), the bearer token the upload token kiln minted for this build and this kind ' +
  '(never an access token; it expires at the Job deadline). Accepted while the build runs. 401: no token, or an ' +
  'unknown or expired one; 403: a token of another build or kind; 409: the build is not running. ' +
  `An SBOM larger than KILN_ARTIFACT_MAX_BYTES (and at most ${UPLOAD_LIMIT_FACTOR} times it) is checked whole, ` +
  'then stored truncated to it. A refused upload is answered at once and its connection closed: the rest of ' +
  'its body is not read.';

/** What the upload routes mean by their refusals: the token is an upload token, not a user's. */
const UPLOAD_ERRORS = {
  400: `Not JSON of the format kiln expects, or nested deeper than ${MAX_JSON_DEPTH} levels`,
  401: 'No upload token, or an unknown or expired one',
  403: 'An upload token of another build or of the other kind',
  409: 'The build is not running',
  413: `A scan report over KILN_ARTIFACT_MAX_BYTES, an SBOM over ${UPLOAD_LIMIT_FACTOR} × KILN_ARTIFACT_MAX_BYTES`,
};

/**
 * The SBOM and scan results of a build: served to users with `build:read`, uploaded by the
 * build's pod with its upload token (docs/adr/0019-build-steps-and-artifacts.md).
 */
@ApiTags('builds')
@ApiTenantScoped()
@Controller('builds')
export class ArtifactsController {
  constructor(private readonly artifacts: BuildArtifacts) {}

  @Get(':id/sbom')
  @RequirePermission('build:read')
  @ApiOperation({
    summary: "The build's SBOM",
    description:
      'The SPDX or CycloneDX JSON document the SBOM step wrote for the pushed image (`build:read`). 404 until it is stored. ' +
      'A stored text that cannot be served as a document (truncated, or stored before kiln checked it) comes in `partial`, with a `note` saying why.',
  })
  @ApiErrors(200, { type: SbomDto, description: 'The SBOM' }, [400, 401, 403, 404, 409, 429], {
    404: 'No such build in this tenant, or no SBOM stored for it (yet)',
    409: 'The stored SBOM is damaged and cannot be read',
  })
  sbom(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<SbomView> {
    return this.artifacts.sbom(tenant.tenantId, id);
  }

  @Get(':id/scan')
  @RequirePermission('build:read')
  @ApiOperation({
    summary: "The build's vulnerability findings",
    description:
      "The scanner's findings in one shape whatever the scanner, a count per severity and the scan policy's verdict (`build:read`). 404 until they are stored.",
  })
  @ApiErrors(200, { type: ScanDto, description: 'The findings' }, [400, 401, 403, 404, 409, 429], {
    404: 'No such build in this tenant, or no scan stored for it (yet)',
    409: 'The stored scan is damaged and cannot be read',
  })
  scan(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<ScanView> {
    return this.artifacts.scan(tenant.tenantId, id);
  }
}

/** The build pod's uploads, authenticated by its upload token rather than a user's. */
@ApiTags('builds')
@Controller('builds')
export class ArtifactUploadsController {
  constructor(private readonly artifacts: BuildArtifacts) {}

  @Put(':id/sbom')
  @Public()
  @HttpCode(204)
  @ApiBearerAuth(UPLOAD_TOKEN_SCHEME)
  @ApiOperation({
    summary: "Upload the build's SBOM (the build pod)",
    description: UPLOAD_DESCRIPTION,
  })
  @ApiBody({ schema: { type: 'object' } })
  @ApiErrors(204, { description: 'Stored' }, [400, 401, 403, 404, 409, 413, 429], UPLOAD_ERRORS)
  uploadSbom(
    @Param('id', UuidParamPipe) id: string,
    @Req() request: Request,
    @Res({ passthrough: true }) response: Response,
  ): Promise<void> {
    return this.upload(id, 'sbom', request, response);
  }

  @Put(':id/scan')
  @Public()
  @HttpCode(204)
  @ApiBearerAuth(UPLOAD_TOKEN_SCHEME)
  @ApiOperation({
    summary: "Upload the build's scan report (the build pod)",
    description: UPLOAD_DESCRIPTION,
  })
  @ApiBody({ schema: { type: 'object' } })
  @ApiErrors(204, { description: 'Stored' }, [400, 401, 403, 404, 409, 413, 429], UPLOAD_ERRORS)
  uploadScan(
    @Param('id', UuidParamPipe) id: string,
    @Req() request: Request,
    @Res({ passthrough: true }) response: Response,
  ): Promise<void> {
    return this.upload(id, 'scan', request, response);
  }

  private async upload(
    id: string,
    kind: ArtifactKind,
    request: Request,
    response: Response,
  ): Promise<void> {
    try {
      // The token is checked before a byte of the body is read.
      await this.artifacts.authorizeUpload(id, kind, request.headers.authorization);
      const body = await readUploadBody(request, this.artifacts.uploadLimit(kind));
      await this.artifacts.receive(id, kind, body);
    } catch (error) {
      leaveBodyUnread(request, response);
      throw error;
    }
  }
}
