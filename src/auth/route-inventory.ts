import { type INestApplicationContext, RequestMethod } from '@nestjs/common';
import { METHOD_METADATA, MODULE_PATH, PATH_METADATA } from '@nestjs/common/constants.js';
import { ModulesContainer, Reflector } from '@nestjs/core';
import type { Permission } from './permissions.js';
import { PERMISSION_KEY, PUBLIC_KEY } from './require-permission.decorator.js';

export interface RouteDeclaration {
  readonly method: string;
  readonly path: string;
  readonly permission: Permission | undefined;
  readonly public: boolean;
}

/**
 * Every HTTP route the application serves, with what it declares for the AuthGuard. Used to prove
 * default deny: a route that is neither @Public nor @RequirePermission is a defect.
 */
export function listRoutes(app: INestApplicationContext): RouteDeclaration[] {
  const container = app.get(ModulesContainer);
  const reflector = app.get(Reflector);
  const routes: RouteDeclaration[] = [];
  for (const module of container.values()) {
    const modulePath = (Reflect.getMetadata(
      MODULE_PATH + container.applicationId,
      module.metatype,
    ) ??
      Reflect.getMetadata(MODULE_PATH, module.metatype) ??
      '') as string;
    for (const wrapper of module.controllers.values()) {
      const controller = wrapper.metatype as (new (...args: never[]) => object) | null;
      if (controller === null) continue;
      const controllerPaths = asArray(
        Reflect.getMetadata(PATH_METADATA, controller) as string | string[],
      );
      const prototype = controller.prototype as Record<string, unknown>;
      for (const name of Object.getOwnPropertyNames(prototype)) {
        const handler = prototype[name];
        if (name === 'constructor' || typeof handler !== 'function') continue;
        const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
        if (method === undefined) continue;
        const targets = [handler, controller];
        for (const controllerPath of controllerPaths) {
          for (const handlerPath of asArray(
            Reflect.getMetadata(PATH_METADATA, handler) as string | string[],
          )) {
            routes.push({
              method: RequestMethod[method],
              path: joinPath(modulePath, controllerPath, handlerPath),
              permission: reflector.getAllAndOverride<Permission | undefined>(
                PERMISSION_KEY,
                targets,
              ),
              public:
                reflector.getAllAndOverride<boolean | undefined>(PUBLIC_KEY, targets) === true,
            });
          }
        }
      }
    }
  }
  return routes.sort((a, b) => `${a.path} ${a.method}`.localeCompare(`${b.path} ${b.method}`));
}

function asArray(value: string | string[] | undefined): string[] {
  if (value === undefined) return [''];
  return Array.isArray(value) ? value : [value];
}

function joinPath(...parts: string[]): string {
  const joined = parts
    .flatMap((part) => part.split('/'))
    .filter((segment) => segment !== '')
    .join('/');
  return `/${joined}`;
}
